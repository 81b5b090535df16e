"""A real Prometheus (Debian's) scrapes a real daemon whose job reads Canal's Kafka topic of a real MariaDB while
a snapshot brings the table's rows: every expression of the shipped Grafana dashboard returns data, every alert
rule loads and evaluates cleanly against the real series and stays quiet while the job runs and its source is
still, /healthz follows the job's state, and a paused job makes its alert pending."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from canalbridge.canal.kafka_records import RecordFormat
from canalbridge.devkit.catalog import ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from tests.daemon_process import cli, daemon_log, daemon_sections, job_status, running_daemon, stop
from tests.helpers import eventually
from tests.infra.prometheus import PrometheusServer
from tests.infra.sql_source import Source, create_sql
from tests.integration.daemon.test_alert_rules import RULES, dashboard_expressions
from tests.integration.real.test_real_kafka import MARKER, committed_through, published_ends

pytestmark = [pytest.mark.real, pytest.mark.kafka, pytest.mark.spark]

DB = "monitored"  # (also its topic's name)
SIGNALS = "canalbridge_signal"
PASSWORD = "monitoring-secret"
ROWS = 1000  # before Canal starts: only the snapshot brings them, 100 a chunk


def config_text(tmp_path: Path, bootstrap: str, port: int) -> str:
    return daemon_sections(str(tmp_path / "warehouse")) + f"""
[[job]]
name = "real"
[job.kafka]
bootstrap_servers = "{bootstrap}"
topic = "{DB}"
format = "protobuf"
transaction_markers = true
poll_timeout_ms = 200
[job.commit]
interval_seconds = 1
min_events = 500
min_bytes = 1
[job.snapshot]
host = "127.0.0.1"
port = {port}
user = "{DB}_user"
password = "{PASSWORD}"
signal_table = "{DB}.{SIGNALS}"
chunk_rows = 100
parallelism = 1
[[job.channel]]
source = "{DB}.orders"
target = "lake.{DB}.orders"
"""


def metrics_port(config: Path) -> int:
    return int(re.search(r"metrics_port = (\d+)", config.read_text()).group(1))  # type: ignore[union-attr]


def health(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def snapshot_of(config: Path) -> dict | None:
    status = job_status(config, "real")
    return status["channels"][0]["snapshot"] if status else None


@pytest.mark.timeout(900)
def test_prometheus_reads_the_dashboard_and_the_alert_rules_from_a_daemon_whose_snapshot_meets_its_stream(
        kafka_canal, kafka_broker, mariadb, tmp_path):
    orders = TableDef(DB, "orders", ORDERS_COLUMNS)
    mariadb.create_database(DB)
    mariadb.execute(create_sql(orders), SIGNAL_TABLE_DDL.format(table=SIGNALS),
                    f"CREATE TABLE {MARKER} (id INT PRIMARY KEY)", database=DB)
    mariadb.snapshot_user(f"{DB}_user", PASSWORD, DB, SIGNALS)
    source = Source(mariadb, DB, (orders,), seed=65)
    for _ in range(ROWS // 100):
        source.insert(orders, [source.row(orders) for _ in range(100)])
    source.commit()
    mariadb.execute("ANALYZE TABLE orders", database=DB)  # (the snapshot's estimate is InnoDB's TABLE_ROWS)
    kafka_canal(DB, flat=False)  # its stream starts here
    config = tmp_path / "canalbridge.toml"
    config.write_text(config_text(tmp_path, kafka_broker.bootstrap, mariadb.port))
    config.chmod(0o600)
    port = metrics_port(config)
    with PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{port}"], [RULES]) as prometheus, \
            running_daemon(config) as daemon, mariadb.connection(DB) as holder:
        # Hold the snapshot in the middle of the table, its rate and time left known: once a chunk landed,
        # lock the signal table, which the next chunk's open signal waits for. (Nine chunks, each a commit,
        # are left: none lands before the lock.)
        assert eventually(lambda: daemon.poll() is not None or (snapshot_of(config) or {}).get("chunks", 0) >= 1,
                          300), daemon_log(config)[-3000:]
        cursor = holder.cursor()
        cursor.execute(f"LOCK TABLES {SIGNALS} WRITE")
        held = snapshot_of(config)
        assert held is not None and held["phase"] == "reading" and held["seconds_left"] is not None, held
        for _ in range(5):  # the stream goes on meanwhile
            source.insert(orders, [source.row(orders) for _ in range(10)])
            source.update(orders, key := source.rng.choice(source.keys(orders)), source.row(orders, key))
            source.commit()
        expressions = [expression.replace("$sync_job", "real") for expression in dashboard_expressions()]
        assert eventually(lambda: prometheus.targets_up() and all(prometheus.query(each) for each in expressions),
                          120), [each for each in expressions if not prometheus.query(each)]
        assert health(port) == (200, {"healthy": True, "waiting": [], "jobs": {"real": "RUNNING"}})

        cursor.execute("UNLOCK TABLES")
        ends = published_ends(kafka_broker, DB, 1, source, RecordFormat.PROTOBUF, 1)
        assert eventually(lambda: daemon.poll() is not None or (
            (snapshot_of(config) or {}).get("phase") == "finished" and committed_through(config, ends)), 300), (
            daemon_log(config)[-3000:])
        # Everything is in: the lag reads 0 though the source is still, and no rule fires.
        assert eventually(lambda: _value(prometheus, 'canalbridge_lag_seconds{sync_job="real"}') == 0.0, 60)
        # A rule's state is its last evaluation's: one from before the lag fell (a commit waited behind a chunk)
        # may still hold it pending.
        settled = time.time()
        assert eventually(lambda: prometheus.rules_evaluated_after(settled), 60), prometheus.rules()
        rules = prometheus.rules()
        assert len(rules) == 5 and all(rule["health"] == "ok" for rule in rules), rules
        assert all(rule["state"] == "inactive" for rule in rules), [
            (rule["name"], rule["state"]) for rule in rules if rule["state"] != "inactive"]
        for rule in rules:  # each reads series the daemon exports (a misspelt name would read nothing)
            for name in set(re.findall(r"canalbridge_[a-z_]+", rule["query"])):
                assert prometheus.query(f'count({{__name__="{name}",sync_job="real"}})'), (rule["name"], name)

        assert "job real: PAUSED" in cli("pause", "-c", str(config), "real").stdout
        assert health(port) == (503, {"healthy": False, "waiting": ["real"], "jobs": {"real": "PAUSED"}})
        assert eventually(lambda: _state(prometheus, "CanalbridgeJobNotRunning") == "pending", 60)
        assert _value(prometheus, 'canalbridge_lag_seconds{sync_job="real"}') is None  # (only while running)
        stop(daemon, config)


def _value(prometheus: PrometheusServer, expression: str) -> float | None:
    found = prometheus.query(expression)
    return float(found[0]["value"][1]) if found else None


def _state(prometheus: PrometheusServer, alert: str) -> str:
    return next(rule["state"] for rule in prometheus.rules() if rule["name"] == alert)
