"""The Consumer's fast lane: which stretches of a batch it routes as columns, and what it tells of them."""

from __future__ import annotations

import threading
import time

from canalbridge.devkit.entries import BinlogWriter, ColumnDef, Flavor, TableDef
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.consumer.lane import CutWatch, Lane
from canalbridge.sync.consumer.policy import CommitPolicy, PendingWork
from canalbridge.sync.model.changes import RowRun
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.settings import ChannelSettings, CommitSettings
from canalbridge.sync.source.link import Outstanding
from tests.infra.memory_writer import InMemoryWriter

EventType = entry_pb.EventType
COLUMNS = (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(8)"))
SHARD_1, SHARD_2, OTHER = TableDef("db", "t_1", COLUMNS), TableDef("db", "t_2", COLUMNS), TableDef("db", "u", COLUMNS)
QUIET = CommitSettings(interval_seconds=3600, min_events=10**6, min_bytes=10**9, max_bytes=10**12)


class RecordingChannel(Channel):
    """A channel (not started) that keeps the runs the lane hands it."""

    def __init__(self, source: str) -> None:
        super().__init__("job", ChannelSettings(source, "lake.t"), ChannelSink.of(InMemoryWriter(source)),
                         threading.Event(), 10.0)
        self.runs: list[RowRun] = []

    def add_rows(self, run: RowRun) -> None:
        self.runs.append(run)


def insert(binlog: BinlogWriter, table: TableDef, key: int) -> entry_pb.Entry:
    return binlog.rows(table, EventType.INSERT, [(None, {"id": key, "name": "x"})])


def watch(work: PendingWork | None = None, settings: CommitSettings = QUIET, start: int = 0) -> CutWatch:
    work = work or PendingWork(started_at=time.monotonic())
    policy = CommitPolicy(settings, 64)
    return CutWatch(policy, work, policy.due(work, Outstanding(1, 1), time.monotonic()) is not None, start)


def lane_over(entries: list[entry_pb.Entry], channels: dict[str, Channel | bool | None]) -> Lane:
    """A lane over ``entries`` whose tables go where ``channels`` says (by table name; absent: no channel)."""
    return Lane(entries, lambda table, position: channels.get(table.table), Outstanding(len(entries), 1))


def test_a_stretch_hands_each_channel_its_tables_runs_in_stream_order():
    binlog = BinlogWriter(clock=lambda: 1700000000.0)
    entries = [*binlog.open(), insert(binlog, SHARD_1, 1), insert(binlog, SHARD_2, 2), insert(binlog, OTHER, 3),
               insert(binlog, SHARD_1, 4), binlog.end(), *binlog.open(), insert(binlog, SHARD_1, 5)]
    merged, other = RecordingChannel("db.t_*"), RecordingChannel("db.u")
    lane = lane_over(entries, {"t_1": merged, "t_2": merged, "u": other})
    stop = lane.route(0, binlog.journal, 0, False, False, watch())
    assert stop == len(entries) and merged.runs == []
    lane.hand_over()
    # The merged channel's shards stay in stream order: a run per switch between them, none merged across.
    assert [(run.table.table, [run.position(i) for i in range(len(run))]) for run in merged.runs] == [
        ("t_1", [EntryPosition.of(entries[1])]),
        ("t_2", [EntryPosition.of(entries[2])]),
        ("t_1", [EntryPosition.of(entries[4]), EntryPosition.of(entries[7])]),
    ]
    assert [run.row_changes for run in other.runs] == [[entries[3].storeValue]]
    assert merged.runs[0].rows == [1]
    assert lane.offsets == [entry.header.logfileOffset for entry in entries]
    assert lane.ends == [5]
    assert lane.last_end == 5 and lane.rows_since_end and lane.in_txn and lane.rows_given == 5
    assert lane.last == EntryPosition.of(entries[-1])
    assert lane.first_execute_time_ms == entries[0].header.executeTime


def test_a_stretch_stops_before_what_the_consumer_routes_entry_by_entry():
    binlog = BinlogWriter()
    channel = RecordingChannel("db.t_1")
    first = insert(binlog, SHARD_1, 1)
    cases: dict[str, tuple[list[entry_pb.Entry], dict[str, Channel | bool | None]]] = {
        "a DDL": ([binlog.ddl("db", "t_1", EventType.ALTER, "ALTER TABLE t_1 ADD c INT")], {"t_1": channel}),
        "a table that needs its checks": ([insert(binlog, OTHER, 2)], {"t_1": channel, "u": False}),
        "an entry not past the last routed": ([first], {"t_1": channel}),
    }
    for name, (tail, channels) in cases.items():
        head = insert(binlog, SHARD_1, 3)
        lane = lane_over([head, *tail], channels)
        assert lane.route(0, binlog.journal, first.header.logfileOffset, False, True, watch()) == 1, name
    rotated = BinlogWriter(file_number=2)
    lane = lane_over([insert(binlog, SHARD_1, 4), insert(rotated, SHARD_1, 5)], {"t_1": channel})
    assert lane.route(0, binlog.journal, 0, False, True, watch()) == 1, "another binlog file"


def test_a_table_no_channel_takes_is_routed_past_and_given_to_none():
    binlog = BinlogWriter()
    taken = RecordingChannel("db.t_1")
    entries = [insert(binlog, OTHER, 1), insert(binlog, SHARD_1, 2), binlog.end()]
    lane = lane_over(entries, {"t_1": taken})
    assert lane.route(0, binlog.journal, 0, False, False, watch()) == 3
    lane.hand_over()
    assert [len(run) for run in taken.runs] == [1] and lane.rows_given == 1 and not lane.in_txn


def test_mariadb_annotated_sql_opens_a_transaction_and_a_statement_standing_alone_stops_the_stretch():
    binlog = BinlogWriter(flavor=Flavor.MARIADB)
    channel = RecordingChannel("db.t_1")
    binlog.open()
    entries = [*binlog.statement(SHARD_1, EventType.INSERT, [(None, {"id": 1, "name": "x"})]), binlog.end()]
    binlog.open()
    annotated = binlog.statement(SHARD_1, EventType.INSERT, [(None, {"id": 2, "name": "y"})])[0]
    lane = lane_over([*entries, annotated], {"t_1": channel})
    assert lane.route(0, binlog.journal, 0, False, False, watch()) == 4
    assert lane.in_txn and not lane.rows_since_end and lane.rows_given == 1
    standing = entry_pb.Entry()
    standing.CopyFrom(annotated)
    flush = entry_pb.RowChange(eventType=EventType.QUERY, isDdl=True, sql="FLUSH TABLES")
    standing.storeValue = flush.SerializeToString()
    assert lane_over([standing], {}).route(0, binlog.journal, 0, False, False, watch()) == 0
    assert lane_over([annotated], {}).route(0, binlog.journal, 0, False, True, watch()) == 1, "inside a transaction"


def test_a_transaction_end_where_a_commit_may_be_due_is_left_to_the_consumer():
    binlog = BinlogWriter()
    channel = RecordingChannel("db.t_1")
    entries = []
    for key in range(3):
        entries += [insert(binlog, SHARD_1, key), binlog.end()]
    # Due by entries at the fourth entry routed: the second transaction's end.
    counted = CommitSettings(interval_seconds=3600, min_events=4, min_bytes=1, max_bytes=10**12)
    lane = lane_over(entries, {"t_1": channel})
    assert lane.route(0, binlog.journal, 0, False, False, watch(PendingWork(time.monotonic(), bytes=1), counted)) == 3
    # Already due: the first end goes back; the last entry of a batch is the Consumer's to check anyway.
    assert lane_over(entries, {"t_1": channel}).route(
        0, binlog.journal, 0, False, False, watch(PendingWork(time.monotonic(), cut_due="ddl"))) == 1
    assert lane_over(entries[:2], {"t_1": channel}).route(
        0, binlog.journal, 0, False, False, watch(PendingWork(time.monotonic(), cut_due="ddl"))) == 2


def test_a_run_rebuilds_positions_from_its_columns_or_keeps_those_given():
    run = RowRun(TableId("db", "t"))
    run.journals, run.offsets, run.execute_times, run.gtids = ["b.1", "b.1"], [4, 9], [10, 20], ["", "g"]
    run.row_changes, run.rows = [b"a", b"b"], [2, 0]
    assert run.last == EntryPosition("b.1", 9, 20, "g") and run.row_count == 3
    assert run.without([0]).row_changes == [b"b"] and run.without([0]).last == run.last
    kept = RowRun(TableId("db", "t"), keeps_positions=True)
    given: Position = EntryPosition("b.1", 5, 1, "x")
    kept.add(given, b"c", 1)
    assert kept.position(0) is given and kept.offsets == [5]
