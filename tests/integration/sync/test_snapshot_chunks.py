"""A snapshot chunk meets the stream exactly (in-memory writers, the dev server): it goes into its target at its
close signal, after the changes before it and before those after it, without the rows of the keys the stream
changed while it was read, and with the table's progress in the same commit.

The chunk here was "read" with stale values for every key the stream changes in its window: only the stream's
values may reach the target for those.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db.signals import CLOSE, OPEN
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.settings import JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, SnapshotChunk, WindowState
from canalbridge.sync.snapshot.progress import TableProgress

from .harness import Harness, job_settings

EventType = entry_pb.EventType
T = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(8)")))
SIGNALS = TableDef("db", "canalbridge_signal", (ColumnDef.of("id", "varchar(128)", is_key=True),
                                                ColumnDef.of("kind", "varchar(16)"), ColumnDef.of("data", "text")))
LANDED = frozenset({WindowState.LANDED})
COLUMNS = (SourceColumn("id", "int(11)", 4, True), SourceColumn("name", "varchar(8)", 12, False))
PROGRESS = TableProgress("snap-1", "db.t", (7,), (7,))
# Read between the signals: 2, 3 and 4 as they were before the stream changed them in the window; 7, which
# only the chunk brings.
CHUNK_ROWS = [("1", "a"), ("2", "b"), ("3", "c"), ("4", "d"), ("5", "e"), ("7", "g")]


def snapshotting(settings: JobSettings) -> JobSettings:
    """``settings`` with a snapshot: the job reads the signal table and makes windows (the test registers them
    itself: the job has no source to read chunks from)."""
    return dataclasses.replace(settings, snapshot=SnapshotSettings(host="127.0.0.1", user="snapshotter",
                                                                   signal_table="db.canalbridge_signal"))


def txn(binlog: BinlogWriter, *statements: tuple[TableDef, int, list[tuple[dict | None, dict | None]]]
        ) -> list[entry_pb.Entry]:
    entries = list(binlog.open())
    for table, event_type, images in statements:
        entries.append(binlog.rows(table, event_type, images))
    return [*entries, binlog.end()]


def signal(window: str, kind: str) -> tuple[TableDef, int, list[tuple[dict | None, dict | None]]]:
    return SIGNALS, EventType.INSERT, [(None, {"id": f"{window}:{kind}", "kind": kind, "data": json.dumps({})})]


def stream(binlog: BinlogWriter) -> tuple[list[entry_pb.Entry], entry_pb.Entry]:
    """The source's transactions around one window; the close signal's entry."""
    entries = txn(binlog, (T, EventType.INSERT, [(None, {"id": 6, "name": "f"})]))  # before the window
    entries += txn(binlog, signal("w1", OPEN))
    entries += txn(binlog, (T, EventType.UPDATE, [({"id": 2, "name": "b"}, {"id": 2, "name": "B2"})]),
                   (T, EventType.DELETE, [({"id": 3, "name": "c"}, None)]),
                   (T, EventType.UPDATE, [({"id": 4, "name": "d"}, {"id": 40, "name": "d"})]))  # a new key
    closing = txn(binlog, signal("w1", CLOSE), (T, EventType.UPDATE, [({"id": 5, "name": "e"},
                                                                         {"id": 5, "name": "E2"})]))
    entries += closing
    entries += txn(binlog, (T, EventType.UPDATE, [({"id": 1, "name": "a"}, {"id": 1, "name": "A2"})]))
    return entries, closing[1]


@pytest.mark.parametrize("decode_raw", [False, True], ids=["decoded", "undecoded"])
@pytest.mark.parametrize("failure", [{}, {"fail_commit_at": {1}}, {"fail_after_commit_at": {1}}],
                         ids=["landed", "replayed", "landed-but-reported-failed"])
def test_a_chunk_lands_once_at_its_close_signal_without_the_keys_the_stream_changed_in_its_window(
        dev_server_factory, decode_raw, failure):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(T,), row_changes=0))
    harness = Harness(server, workload, snapshotting(job_settings(server, workload)),
                      **{T.qualified: {"decode_raw": decode_raw, **failure}})
    windows = harness.job.windows
    assert windows is not None
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    windows.register(window)
    windows.ready(window, SnapshotChunk(COLUMNS, CHUNK_ROWS, len(CHUNK_ROWS), PROGRESS))
    entries, close = stream(BinlogWriter())
    harness.set_entries(entries)
    server.feed("example", entries)
    harness.run_until_acked(30)
    harness.job.pause()

    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "name": "A2"}, ("2",): {"id": "2", "name": "B2"},
                           ("40",): {"id": "40", "name": "d"}, ("5",): {"id": "5", "name": "E2"},
                           ("6",): {"id": "6", "name": "f"}, ("7",): {"id": "7", "name": "g"}}
    assert window.state is WindowState.LANDED
    # A replay routes again, while the window is open, the changes from the ack cursor on (6 among them): a key
    # noted there is one whose last change the stream applies, so dropping it from the chunk is safe.
    changed_in_window = {("2",), ("3",), ("4",), ("40",)}
    assert changed_in_window <= window.keys <= changed_in_window | (set() if not failure else {("6",)})
    assert {chunk.position for chunk in writer.chunks} == {EntryPosition.of(close)}
    landed_with_chunk = [c for c in writer.commits if c.snapshot]
    assert landed_with_chunk and landed_with_chunk[0].end_position >= EntryPosition.of(close)
    assert writer.read_state().snapshot == {"db.t": PROGRESS}, "the progress is read back from the target"
    assert not harness.audit.violations, harness.audit.violations[:3]
    # A replay hands the chunk over again, unless the target held it already.
    assert harness.job.stats.chunks_routed == (2 if "fail_commit_at" in failure else 1)
    assert harness.job.stats.rollbacks == len(failure)


def test_a_row_image_without_the_key_in_a_window_fails_the_job_naming_the_table_and_the_setting(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(T,), row_changes=0))
    harness = Harness(server, workload, snapshotting(job_settings(server, workload)))
    windows = harness.job.windows
    assert windows is not None
    windows.register(ChunkWindow("w1", TableId("db", "t"), ["id"]))
    minimal = TableDef("db", "t", (ColumnDef.of("name", "varchar(8)"),))  # binlog_row_image=MINIMAL's before image
    binlog = BinlogWriter()
    entries = txn(binlog, signal("w1", OPEN)) + txn(binlog, (minimal, EventType.DELETE, [({"name": "a"}, None)]))
    server.feed("example", entries)
    harness.job.start()
    assert harness.job.wait_state(JobState.PAUSED, 30), harness.job.state
    message = str(harness.job.fail_message)
    assert "db.t" in message and "'id'" in message and "binlog_row_image=FULL" in message, message


def test_a_ddl_on_the_table_while_its_chunk_is_read_spoils_the_window_and_nothing_of_the_chunk_lands(
        dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(T,), row_changes=0))
    harness = Harness(server, workload, snapshotting(job_settings(server, workload)))
    windows = harness.job.windows
    assert windows is not None
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    windows.register(window)
    windows.ready(window, SnapshotChunk(COLUMNS, CHUNK_ROWS, len(CHUNK_ROWS), PROGRESS))
    binlog = BinlogWriter()
    entries = txn(binlog, signal("w1", OPEN))  # (built in stream order: each takes the next position)
    entries.append(binlog.ddl("db", "t", EventType.ALTER, "ALTER TABLE t ADD COLUMN qty INT"))
    entries += txn(binlog, signal("w1", CLOSE))
    harness.set_entries(entries)
    server.feed("example", entries)
    harness.run_until_acked(30)
    harness.job.pause()
    assert window.state is WindowState.SPOILED
    assert harness.writers["db.t"].chunks == [] and harness.writers["db.t"].rows == {}
    assert harness.job.stats.chunks_routed == 0

