"""Faults the daemon must survive: each ends with every target exact and no duplicate change."""

from __future__ import annotations

import json
import random
import signal
import threading
from collections import Counter

import pytest

from canalbridge.devserver import DestinationConfig
from canalbridge.devserver.catalog import standard_tables
from canalbridge.devserver.replay import row_changes
from canalbridge.devserver.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from spark_sink.identifiers import quote_table
from spark_sink.verify import expected_typed, read_typed
from tests.helpers import eventually
from tests.spark.test_daemon import PASSWORD, cli, running_daemon, stop, write_config

KILLS = 20


def changelog_config(path, table_name: str) -> None:
    """Make the channel whose target is ``table_name`` a changelog channel."""
    parts = path.read_text().split("[[job.channel]]")
    for index, part in enumerate(parts):
        if f'.{table_name}"' in part:
            parts[index] = part.rstrip("\n") + '\nmode = "changelog"\n'
    path.write_text("[[job.channel]]".join(parts))


@pytest.mark.timeout(1200)  # twenty JVM starts
def test_twenty_sigkills_then_exact_tables_and_no_duplicate_change(spark, spark_settings, dev_server_factory,
                                                                     tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(3)[1:]  # orders (upsert), accounts (changelog)
    workload = Workload(WorkloadSpec(tables=tables, row_changes=6000, pk_change_ratio=0.2, seed=41))
    entries = list(workload)
    server.feed("example", entries)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "killed", tables)
    changelog_config(config, "accounts")
    moments = random.Random(7)
    pause = threading.Event()  # never set: waits below are the random kill moments, not synchronisation
    progress = []
    store = server.destinations["example"].store
    for kill in range(KILLS):
        with running_daemon(config) as daemon:
            assert server.wait_sessions(1, 120), "the daemon never connected"
            if kill % 2:
                # Right after a commit was acked: the next gets, sends and MERGE are under way.
                acked = store.cursors().ack
                store.wait_for(lambda c, acked=acked: c.ack > acked, 60)
                pause.wait(moments.uniform(0.0, 1.5))
            else:
                # Early in the daemon's life: during gets, sends, the first MERGE.
                pause.wait(moments.uniform(0.5, 4.0))
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(60)
        assert server.wait_sessions(0, 30)
        progress.append(server.cursors("example").ack)
    with running_daemon(config) as daemon:
        assert server.wait_sessions(1, 120)
        assert server.destinations["example"].wait_acked(300), "did not converge after the kills"
        stop(daemon)
    assert progress[-1] > progress[0]  # the kills landed while work was being done

    orders = workload.expected["shop.orders"]
    assert read_typed(spark, "lake.killed.orders", orders.table) == expected_typed(orders.table, orders.rows.values())
    log = spark.table(quote_table("lake.killed.accounts"))
    want = sum(2 if event == entry_pb.EventType.UPDATE else 1
               for name, event, _ in row_changes(entries) if name == "shop.accounts")
    assert log.count() == want, "changes missing or appended twice"
    seen = Counter(tuple(r) for r in log.select("_journal", "_offset", "_seq", "_op").collect())
    assert max(seen.values()) == 1
    record_kills(tmp_path, KILLS, progress)


def record_kills(tmp_path, kills: int, progress: list[int]) -> None:
    (tmp_path / "kills.json").write_text(json.dumps({"kills": kills, "ack_after_each_kill": progress}))


def test_canal_server_outage_then_back_converges(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(2)[1:]
    workload = Workload(WorkloadSpec(tables=tables, row_changes=3000, seed=43))
    server.feed("example", workload)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "outage", tables)
    with running_daemon(config) as daemon:
        store = server.destinations["example"].store
        assert store.wait_for(lambda c: c.ack > 500, 180)
        server.stop()  # connection refused from now on
        outage = threading.Event()
        outage.wait(3.0)  # the length of the outage: the receiver retries meanwhile
        server.start()  # same port, same ack cursor
        assert server.destinations["example"].wait_acked(240)
        status = json.loads(cli("status", "-c", str(config), "--json").stdout)
        assert status["jobs"][0]["state"] == "RUNNING"
        stop(daemon)
    expected = workload.expected["shop.orders"]
    assert read_typed(spark, "lake.outage.orders", expected.table) == expected_typed(
        expected.table, expected.rows.values())


def test_wrong_password_pauses_the_job_with_a_named_reason(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", "the-real-password"))
    tables = standard_tables(2)[1:]
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "badauth", tables)
    config.write_text(config.read_text().replace("retry_initial_seconds = 0.1",
                                                 "retry_initial_seconds = 0.1\nreconnect_attempts = 2"))
    with running_daemon(config) as daemon:
        def paused() -> bool:
            result = cli("status", "-c", str(config), "--json")
            return result.returncode == 0 and json.loads(result.stdout)["jobs"][0]["state"] == "PAUSED"

        assert eventually(paused, 180)
        job = json.loads(cli("status", "-c", str(config), "--json").stdout)["jobs"][0]
        assert "authentication failed for user 'canal'" in job["fail_message"]["text"]
        assert f"127.0.0.1:{server.port}" in job["fail_message"]["text"]
        assert server.cursors("example").ack == -1
        stderr = stop(daemon)
    assert PASSWORD not in stderr and PASSWORD not in json.dumps(job)
