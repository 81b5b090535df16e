"""Channels whose writer decodes Canal's RowChange bytes itself (the JVM decoder's path), with in-memory writers."""

from __future__ import annotations

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import rows_count

from .harness import Harness, job_settings

EventType = entry_pb.EventType
TABLE = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(8)")))
RENAMED = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("label", "varchar(8)")))


def raw_harness(server, workload: Workload) -> Harness:
    settings = job_settings(server, workload)
    return Harness(server, workload, settings, **{t.qualified: {"decode_raw": True} for t in workload.spec.tables})


def test_undecoded_row_changes_end_exact_through_key_changes_and_ddls(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example", capacity=16384))
    harness = raw_harness(server, Workload(WorkloadSpec(row_changes=3000, pk_change_ratio=0.2, ddl_every=5)))
    harness.feed()
    harness.run_until_acked()
    written = sum(c.rows_written for c in harness.job.channels)
    harness.job.pause()
    harness.assert_exact()
    assert all(w.decodes_row_changes() and w.commits for w in harness.writers.values())
    # Undecoded, the rows written are the entries' rowsCount: every row change of the workload, once.
    assert written == sum(rows_count(e.header) for e in harness.workload_entries)


def test_columns_changed_in_an_undecoded_row_pause_naming_position_and_ddl(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(TABLE,), row_changes=0))
    harness = raw_harness(server, workload)
    binlog = BinlogWriter()
    first = [*binlog.open(), binlog.rows(TABLE, EventType.INSERT, [(None, {"id": 1, "name": "a"})]), binlog.end()]
    # A DDL that changes no column, then rows whose columns changed all the same.
    alter = binlog.ddl("db", "t", EventType.ALTER, "ALTER TABLE t COMMENT 'x'")
    opened = binlog.open()
    renamed = binlog.rows(RENAMED, EventType.INSERT, [(None, {"id": 2, "label": "b"})])
    entries = [*first, alter, *opened, renamed, binlog.end()]
    harness.set_entries(entries)
    server.feed("example", entries)
    harness.job.start()
    assert harness.job.wait_state(JobState.PAUSED, 30)
    text = harness.job.fail_message.text
    at = EntryPosition.of(renamed)
    assert f"table db.t at binlog position {at.journal}:{at.offset}" in text, text
    assert "columns changed from (id int key, name varchar(8)) to (id int key, label varchar(8))" in text, text
    assert "after the DDL \"ALTER TABLE t COMMENT 'x'\"" in text, text
    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "name": "a"}}  # the first transaction only
    assert harness.job.stats.rollbacks == 1  # not retried: retrying cannot make the row fit
    assert server.cursors("example").ack < server.cursors("example").put
