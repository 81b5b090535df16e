"""Bad input through the daemon: each bad stream pauses its own job with a named reason; the others go on.

One daemon runs six jobs, each on its own dev-server destination: a table
name with quotes and backticks, a 16 MB row, an entry that is not a
RowChange, a row with a column too many, "abc" for an int, and a
destination Canal does not have. The control endpoint has a token, and the
config (holding the password) is world-readable.
"""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.error
import urllib.request

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from spark_sink.identifiers import quote_table
from tests.daemon_process import (
    PASSWORD,
    cli,
    daemon_log,
    daemon_sections,
    job_status,
    metrics_text,
    running_daemon,
    stop,
)
from tests.helpers import eventually
from tests.infra.processes import free_port

INSERT = entry_pb.EventType.INSERT
COUNTERS = TableDef("shop", "counters", (
    ColumnDef.of("id", "bigint(20)", is_key=True), ColumnDef.of("hits", "int(11)"), ColumnDef.of("body", "longtext"),
), table_id=7)
ODD = dataclasses.replace(standard_tables(2)[1], name='we"ird`t')  # orders, renamed
ODD_TARGET = 'lake.bad.`we"ird``t`'
BIG = 16 * 1024 * 1024
TOKEN = "token-" + os.urandom(4).hex()


def inserts(writer: BinlogWriter, ids: range, body: str = "b") -> list[entry_pb.Entry]:
    """One source transaction per row."""
    entries = []
    for key in ids:
        entries += [writer.begin(), writer.rows(COUNTERS, INSERT, [(None, {"id": key, "hits": key, "body": body})]),
                    writer.end()]
    return entries


def spoil(entry: entry_pb.Entry, how: str) -> None:
    """Make a ROWDATA entry bad in one of the ways Canal data can be bad."""
    if how == "garbled":
        entry.storeValue = b"\x0a\xff"  # a length that runs past the end
        return
    change = entry_pb.RowChange.FromString(entry.storeValue)
    columns = change.rowDatas[0].afterColumns
    if how == "wide":
        columns.add(index=3, sqlType=4, name="extra", mysqlType="int(11)", value="1", updated=True)
    elif how == "abc":
        columns[1].value = "abc"
    entry.storeValue = change.SerializeToString()


def job(name: str, destination: str, source: str, target: str, port: int, extra: str = "") -> str:
    return f"""
[[job]]
name = "{name}"
[job.canal]
host = "127.0.0.1"
port = {port}
destination = "{destination}"
username = "canal"
password = "{PASSWORD}"
batch_size = 256
poll_timeout_ms = 100
[job.commit]
reconnect_attempts = 2
interval_seconds = 1
min_events = 2000
min_bytes = 1
retries = 2
retry_initial_seconds = 0.1
{extra}
[[job.channel]]
source = '{source}'
target = '{target}'
"""


@pytest.mark.timeout(900)
def test_bad_streams_pause_their_jobs_with_named_reasons(spark, spark_settings, dev_server_factory, tmp_path,
                                                         monkeypatch):
    bad = ("garbled", "wide", "abc")
    names = ("odd", "big", *bad)
    server = dev_server_factory(*(DestinationConfig(n, "canal", PASSWORD) for n in names))
    port = server.port
    odd = Workload(WorkloadSpec(tables=(ODD,), row_changes=1500, seed=61))
    server.feed("odd", odd)
    writers = {n: BinlogWriter() for n in ("big", *bad)}
    server.feed("big", inserts(writers["big"], range(1, 3)) + inserts(writers["big"], range(3, 4), "x" * BIG))
    for name in bad:
        server.feed(name, inserts(writers[name], range(1, 11)))

    jobs = [job("odd", "odd", f"shop.{ODD.name}", ODD_TARGET, port),
            job("big", "big", "shop.counters", "lake.bad.big", port),
            *(job(n, n, "shop.counters", f"lake.bad.{n}", port) for n in bad),
            job("nodest", "nosuch", "shop.counters", "lake.bad.nodest", port)]
    config = tmp_path / "canalbridge.toml"
    config.write_text(daemon_sections(spark_settings.warehouse,
                                      f'control = "127.0.0.1:{free_port()}"\ncontrol_token_env = "TEST_CONTROL_TOKEN"')
                      + "".join(jobs))
    config.chmod(0o644)  # world-readable, with passwords in it
    monkeypatch.setenv("TEST_CONTROL_TOKEN", TOKEN)

    with running_daemon(config) as daemon:
        assert eventually(lambda: daemon.poll() is not None or job_status(config, "odd") is not None, 180)
        assert daemon.poll() is None, daemon_log(config)[-3000:]
        for name in ("odd", "big", *bad):
            assert server.destinations[name].wait_acked(300), (name, daemon_log(config)[-3000:])
        acked = {name: server.cursors(name).ack for name in bad}
        for name in bad:  # the bad row comes after ten good transactions that are committed and acked
            entries = inserts(writers[name], range(11, 21))
            # The ROWDATA of id 11: had a good transaction come first in this feed, whether it is
            # committed before the bad row stops the job would depend on the commit interval.
            spoil(entries[1], name)
            server.feed(name, entries)
        paused: dict[str, dict] = {}  # each job's status as it showed the pause (nodest's retries go on after it)

        def seen_paused(name: str) -> bool:
            status = job_status(config, name) or {}
            if status.get("state") == "PAUSED":
                paused[name] = status
            return name in paused

        for name in (*bad, "nodest"):
            assert eventually(lambda name=name: seen_paused(name), 240), name
        reasons = {name: paused[name]["fail_message"]["text"] for name in (*bad, "nodest")}
        # A destination Canal does not have yet may appear (Canal scans for new ones): an outage, tried again.
        assert paused["nodest"]["fail_message"]["kind"] == "OUTAGE"
        assert {paused[name]["fail_message"]["kind"] for name in bad} == {"RUN_FAIL"}
        for name in bad:
            assert server.cursors(name).ack == acked[name], f"{name}: acked past the bad entry"
        assert job_status(config, "odd")["state"] == "RUNNING" and job_status(config, "big")["state"] == "RUNNING"

        control = json.loads(config.read_text().split("control = ")[1].split()[0])
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{control}/status", timeout=30)
        assert refused.value.code == 401
        status_text = cli("status", "-c", str(config), "--json").stdout  # the CLI sends the token
        metrics = metrics_text(config)
        log = stop(daemon, config)

    position = "at binlog position mysql-bin.000001:"
    assert "table shop.counters" in reasons["garbled"] and position in reasons["garbled"]
    assert "storeValue is not a RowChange" in reasons["garbled"]
    assert "row has 4 columns" in reasons["wide"] and position in reasons["wide"]
    assert "lake.bad.abc" in reasons["abc"] and "'abc'" in reasons["abc"] and "does not convert" in reasons["abc"]
    assert "destination:nosuch should start first" in reasons["nodest"]
    assert "is readable by every user" in log
    for text in (log, status_text, metrics, json.dumps(reasons)):
        assert PASSWORD not in text and TOKEN not in text

    for name in bad:  # the ten good transactions, nothing of the bad one
        assert sorted(r.id for r in spark.table(f"lake.bad.{name}").collect()) == list(range(1, 11)), name
    big = {r.id: r.size for r in spark.sql("SELECT id, length(body) AS size FROM lake.bad.big").collect()}
    assert big == {1: 1, 2: 1, 3: BIG}
    expected = odd.expected[ODD.qualified]
    assert read_typed(spark, ODD_TARGET, ODD) == expected_typed(ODD, expected.rows.values())
    assert spark.table(quote_table(ODD_TARGET)).count() == len(expected.rows)
