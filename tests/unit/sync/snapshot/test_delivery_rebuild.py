"""A channel whose target waits to be made anew (``canalbridge rebuild``) gets none of its table's entries until
its rebuild window closes in the stream, every one after it, and the same again after an abort: the snapshot
that follows reads what came before the close signal."""

from __future__ import annotations

import structlog

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.consumer.delivery import Delivery
from canalbridge.sync.consumer.second_pass import SecondPass
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.stats import ConsumerStats
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.model.tracking import CommittedPositions
from canalbridge.sync.settings import ChannelSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, SnapshotChunk, WindowState
from canalbridge.sync.snapshot.progress import TableProgress
from canalbridge.sync.snapshot.windows import Windows
from canalbridge.sync.source.canal.settings import CanalSettings
from tests.unit.sync.snapshot.signal_rows import signal

SIGNALS = TableId("shop", "canalbridge_signal")
ORDERS, ITEMS = TableId("shop", "orders"), TableId("shop", "items")


class FakeChannel:
    """What Delivery asks of a channel: the offsets of the entries and the chunks it was given."""

    def __init__(self, source: str, *, rebuild: bool = False) -> None:
        self.settings = ChannelSettings(source, f"lake.{source}")
        self.source = source
        self.source_table = None
        self.refill = None
        self.committed_position = None
        self.rebuild_pending = rebuild
        self.rebuild_window: ChunkWindow | None = None
        self.given: list[int | str] = []

    def begin(self, label: str) -> None:
        pass

    def add(self, position: EntryPosition, row_change: bytes, **kwargs: object) -> None:
        self.given.append(position.offset)

    def add_chunk(self, position: EntryPosition, window: ChunkWindow) -> None:
        self.given.append(f"chunk@{position.offset}")


class Stream:
    def __init__(self, *channels: FakeChannel) -> None:
        self.windows = Windows(SIGNALS)
        settings = JobSettings("j", CanalSettings("h", 1, "d"), tuple(c.settings for c in channels),
                               snapshot=SnapshotSettings(host="h", user="u", signal_table="shop.canalbridge_signal"))
        log = structlog.get_logger("test")
        self.delivery = Delivery(settings, list(channels), CommittedPositions(), None,  # type: ignore[arg-type]
                                 SecondPass(log), ConsumerStats(), log, self.windows)

    def mark(self, replaces: bool = True) -> ChunkWindow:
        """The rebuild's mark of shop.orders, registered and given its (empty) chunk."""
        window = ChunkWindow("w1", ORDERS, ["id"], replaces=replaces)
        self.windows.register(window)
        self.windows.ready(window, SnapshotChunk((SourceColumn("id", "int(11)", 4, True),), [], 0,
                                                TableProgress("s1", "shop.orders", None, key=("id",), planned=False)))
        return window

    def row(self, table: TableId, offset: int) -> None:
        entry = entry_pb.Entry(header=entry_pb.Header(eventType=entry_pb.EventType.INSERT),
                               storeValue=entry_pb.RowChange(eventType=entry_pb.EventType.INSERT).SerializeToString())
        self.delivery.rows(table, EntryPosition("bin.1", offset), entry, missed=False)

    def signal(self, kind: str, offset: int) -> None:
        entry = entry_pb.Entry(storeValue=signal("w1", kind).SerializeToString())
        self.delivery.rows(SIGNALS, EntryPosition("bin.1", offset), entry, missed=False)


def test_the_tables_entries_before_the_close_signal_are_dropped_and_those_after_it_given():
    orders, items = FakeChannel("shop.orders", rebuild=True), FakeChannel("shop.items")
    stream = Stream(orders, items)
    window = stream.mark()
    stream.delivery.begin("txn-1")
    stream.row(ORDERS, 5)  # before the rebuild's snapshot began: it reads the row
    stream.row(ITEMS, 6)  # the other channels stream on
    stream.signal("open", 10)
    stream.row(ORDERS, 15)  # between the mark's signals: read by the snapshot too (its keys are planned after)
    stream.signal("close", 20)
    stream.row(ORDERS, 25)
    assert orders.given == ["chunk@20", 25] and items.given == [6]
    assert orders.rebuild_window is window and orders.rebuild_pending


def test_an_abort_drops_them_again_until_the_replay_closes_the_window_and_a_landing_ends_the_wait():
    orders = FakeChannel("shop.orders", rebuild=True)
    stream = Stream(orders)
    window = stream.mark()
    stream.delivery.begin("txn-1")
    stream.signal("open", 10)
    stream.signal("close", 20)
    stream.row(ORDERS, 25)
    stream.delivery.aborted()  # the replay routes the same entries again, the table's before the close dropped
    assert window.state is WindowState.OPEN
    stream.delivery.begin("txn-2")
    stream.row(ORDERS, 15)
    stream.signal("close", 20)
    stream.row(ORDERS, 25)
    assert orders.given == ["chunk@20", 25, "chunk@20", 25]
    stream.delivery.landed("txn-2", set())
    stream.windows.forget(window)  # (the snapshot's thread forgets a window once it landed)
    stream.delivery.begin("txn-3")
    stream.row(ORDERS, 30)
    assert orders.given[-1] == 30 and not orders.rebuild_pending and orders.rebuild_window is None


def test_a_window_that_does_not_replace_the_target_ends_no_wait():
    orders = FakeChannel("shop.orders", rebuild=True)
    stream = Stream(orders)
    stream.mark(replaces=False)  # (a re-sync's mark: the rebuild's comes first, so it is not the one)
    stream.delivery.begin("txn-1")
    stream.signal("open", 10)
    stream.signal("close", 20)
    stream.row(ORDERS, 25)
    assert orders.given == ["chunk@20"] and orders.rebuild_window is None
