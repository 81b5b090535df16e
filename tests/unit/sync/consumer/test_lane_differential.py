"""The fast lane leaves the Consumer exactly where routing entry by entry would: random streams, both ways.

The same batch is routed twice by a Consumer: with the lane (entries whose
headers hold their positions), and entry by entry (the same positions given
beside the entries, as a Kafka link gives them, which runs no lane). Every
piece of state the routing leaves must be equal: what each channel got and
in which order, where commits cut, the stream's order, what was routed
since the last transaction end, the positions taken, the pending work and
the counters.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from canalbridge.devkit.entries import BinlogWriter, ColumnDef, Flavor, TableDef
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.consumer.consumer import Consumer
from canalbridge.sync.consumer.policy import PendingWork
from canalbridge.sync.model.changes import RowRun
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.model.tracking import AckState, CommittedPositions
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SchemaSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from canalbridge.sync.source.link import Outstanding
from tests.infra.memory_writer import InMemoryWriter

EventType = entry_pb.EventType
COLUMNS = (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(8)"))
TABLES = [TableDef("db", name, COLUMNS) for name in ("t_1", "t_2", "u", "unsynced", "t_9")]
CHANNELS = tuple(ChannelSettings(f"db.{name}", f"lake.{name}") for name in ("t_1", "t_2", "u"))


class RecordingChannel(Channel):
    """A channel (not started) that records each entry it is given, however it was given."""

    def __init__(self, settings: ChannelSettings) -> None:
        super().__init__("job", settings, ChannelSink.of(InMemoryWriter(settings.source)), threading.Event(), 10.0)
        self.got: list[tuple[Any, ...]] = []

    def begin(self, label: str) -> None:
        pass

    def add(self, position: Position, row_change: bytes, *, table: TableId, dml: bool = True, rows: int = 0) -> None:
        self.got.append((position, row_change, tuple(table), dml, rows))

    def add_rows(self, run: RowRun) -> None:
        self.got += [(run.position(i), run.row_changes[i], tuple(run.table), True, run.rows[i])
                     for i in range(len(run))]


class QuietLink:
    """A Canal link as the Consumer sees it, holding ``outstanding`` and acking nothing."""

    resends_in_stream = True
    marks_transactions = True
    store_get_size = 100
    epoch = 1

    def __init__(self, outstanding: Outstanding) -> None:
        self.outstanding = outstanding

    def is_current(self, epoch: int) -> bool:
        return True

    def ack_through(self, epoch: int, cut: Position | None) -> int:
        return 0

    def supersede(self, epoch: int, batch_id: int, counts_through: Position | None) -> None:
        pass


class CutRecorder(Consumer):
    """A Consumer whose commits only record where they cut (nothing is in flight)."""

    cuts: list[tuple[Position, str]]

    def _commit(self, cut: Position, label: str, reason: str, *, whole: bool) -> None:
        self.cuts.append((cut, reason))


def stream(rng: random.Random, flavor: Flavor) -> list[entry_pb.Entry]:
    binlog = BinlogWriter(flavor=flavor, clock=lambda: 1_700_000_000 + rng.random() * 10,
                          max_file_bytes=rng.choice([600, 1 << 30]),
                          gtid_uuid=rng.choice([None, "3e11fa47-71ca-11e1-9e33-c80aa9429562"]))
    entries: list[entry_pb.Entry] = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.05:
            entries.append(binlog.ddl("db", "t_9", EventType.RENAME, "RENAME TABLE db.t_1 TO db.t_9"))
        elif kind < 0.1:
            entries.append(binlog.ddl("db", rng.choice(["t_1", "u", "unsynced"]), EventType.ALTER,
                                      "ALTER TABLE x ADD c INT"))
        else:
            entries += binlog.open()
            for _ in range(rng.randint(0, 5)):
                entries += binlog.statement(rng.choice(TABLES), EventType.INSERT,
                                            [(None, {"id": rng.randint(1, 99), "name": "x"})])
            if rng.random() < 0.9:
                entries.append(binlog.end())
            if rng.random() < 0.05:
                again = entry_pb.Entry()
                again.CopyFrom(entries[-1])
                entries.append(again)  # a position met twice
    return entries


def route(entries: list[entry_pb.Entry], head: int, lane: bool, case: dict[str, Any]) -> dict[str, Any]:
    """Route ``entries`` as two batches (cut at ``head``), following every cut; the state it leaves."""
    settings = JobSettings("job", CanalSettings("127.0.0.1", 1, "example"), CHANNELS, case["commit"],
                           schema=SchemaSettings(rename_table="follow"))
    channels = [RecordingChannel(channel) for channel in CHANNELS]
    committed = CommittedPositions()
    for source, position in case["committed"]:
        committed.advance(source, position)
    consumer = CutRecorder(settings, QuietLink(case["outstanding"]), channels, committed, AckState(),
                           threading.Event(), lambda exc: None)
    consumer.cuts = []
    consumer._second.routed._keys = list(case["routed_before"])  # an earlier epoch's, gaps and all
    consumer._taken.new_batch()
    work = PendingWork(started_at=time.monotonic(), bytes=10)
    for batch in (entries[:head], entries[head:]):
        todo: Sequence[entry_pb.Entry] = batch
        while todo:
            positions = None if lane else [EntryPosition.of(entry) for entry in todo]
            if not consumer._route(todo, work, "label", 1, positions):
                break
            carried = consumer._taken.carried()
            todo = carried.entries if carried is not None else []
            work = PendingWork(started_at=time.monotonic(), bytes=10)
            consumer._last_position = None
    order, taken = consumer._order, consumer._taken.last_batch
    return {
        "channels": [channel.got for channel in channels], "cuts": consumer.cuts,
        "high": order.high, "sent ends": list(order._sent_ends), "rows since end": order.rows_since_end,
        "routed since end": consumer._second.routed._keys,
        "taken": (taken._journals, taken._offsets),
        "work": (work.events, work.in_source_txn, work.cut_due), "last": consumer._last_position,
        "stats": (consumer.stats.entries, consumer.stats.rows_routed, consumer.stats.ddl, consumer.stats.filled_in),
        "channels opened": sorted(consumer.channels),
    }


@pytest.mark.parametrize("seed", range(4))
def test_the_lane_leaves_the_consumer_where_routing_entry_by_entry_does(seed):
    rng = random.Random(seed)
    for _ in range(150):
        flavor = rng.choice([Flavor.MYSQL, Flavor.MARIADB])
        entries = stream(rng, flavor)
        routed_before: list[Any] = []
        if rng.random() < 0.3:
            # An earlier epoch routed part of this since a transaction end, missing some (a first-pass gap).
            upto = rng.randrange(len(entries))
            since = max((i for i in range(upto + 1)
                         if entries[i].entryType == entry_pb.EntryType.TRANSACTIONEND), default=0)
            routed_before = [EntryPosition.of(e).sort_key for e in entries[since:upto + 1] if rng.random() < 0.8]
        case = {
            "commit": CommitSettings(interval_seconds=rng.choice([0, 3600]), min_events=rng.randint(1, 30),
                                     min_bytes=rng.choice([1, 10**9]), max_bytes=rng.choice([5, 10**12])),
            "outstanding": Outstanding(rng.randint(0, 5), 5),
            "committed": ([(rng.choice(CHANNELS).source, EntryPosition.of(rng.choice(entries)))]
                          if rng.random() < 0.3 else []),
            "routed_before": routed_before,
        }
        head = rng.randint(0, len(entries))
        assert route(entries, head, True, case) == route(entries, head, False, case), (seed, case)
