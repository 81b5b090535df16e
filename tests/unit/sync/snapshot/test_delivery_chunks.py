"""A closed window's chunk goes to the channel the stream routes its table to, and lands only with that channel's
commit: for shards merged into one target, the channel named by their pattern."""

from __future__ import annotations

import pytest
import structlog

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.consumer.delivery import Delivery
from canalbridge.sync.consumer.second_pass import SecondPass
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.stats import ConsumerStats
from canalbridge.sync.model.tables import TableId, TablePattern
from canalbridge.sync.model.tracking import CommittedPositions
from canalbridge.sync.settings import ChannelSettings, JobSettings, SchemaSettings
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, SnapshotChunk, WindowState
from canalbridge.sync.snapshot.progress import TableProgress
from canalbridge.sync.snapshot.windows import Windows
from canalbridge.sync.source.canal.settings import CanalSettings
from tests.unit.sync.snapshot.signal_rows import signal

SIGNALS = TableId("shop_1", "canalbridge_signal")
RULE = ChannelSettings("shop_*.orders", "lake.shop.orders", pattern=TablePattern("shop_*.orders"))


class FakeChannel:
    """What Delivery asks of a channel, and the chunks it was given."""

    def __init__(self, settings: ChannelSettings) -> None:
        self.settings = settings
        self.source = settings.source
        self.source_table = None
        self.refill = None
        self.committed_position = None
        self.chunks: list[ChunkWindow] = []

    def begin(self, label: str) -> None:
        pass

    def add_chunk(self, position: object, window: ChunkWindow) -> None:
        self.chunks.append(window)


def test_a_shards_chunk_goes_to_the_merged_channel_and_lands_only_if_that_channel_did():
    opened: list[FakeChannel] = []

    def open_channel(settings: ChannelSettings) -> FakeChannel:
        opened.append(FakeChannel(settings))
        return opened[-1]

    windows = Windows(SIGNALS)
    settings = JobSettings("j", CanalSettings("h", 1, "d"), (RULE,))
    log = structlog.get_logger("test")
    delivery = Delivery(settings, [], CommittedPositions(), open_channel, SecondPass(log),  # type: ignore[arg-type]
                        ConsumerStats(), log, windows)
    window = ChunkWindow("w1", TableId("shop_2", "orders"), ["id"])
    windows.register(window)
    windows.ready(window, SnapshotChunk((SourceColumn("id", "int(11)", 4, True),), [("1",)], 1,
                                        TableProgress("s1", "shop_2.orders", (1,), (1,))))

    def routed(kind: str, offset: int) -> None:
        entry = entry_pb.Entry(storeValue=signal("w1", kind).SerializeToString())
        delivery.rows(SIGNALS, EntryPosition("bin.1", offset), entry, missed=False)

    delivery.begin("txn-1")
    routed("open", 10)
    routed("close", 20)
    (channel,) = opened
    assert channel.source == "shop_*.orders" and channel.chunks == [window]
    delivery.landed("txn-1", {"shop_*.orders"})  # the merged channel's commit failed
    assert window.state is WindowState.CLOSED, "the chunk is not in the target"
    delivery.landed("txn-1", set())
    assert window.state is WindowState.LANDED


class RenamedChannel(FakeChannel):
    """A channel named for one table, which also takes the stream's entries."""

    rebuild_pending = False

    def add(self, position: object, value: bytes, **kwargs: object) -> None:
        pass


def rename(delivery: Delivery, sql: str, new: TableId, offset: int) -> None:
    """Route ``sql`` as Canal sends a RENAME: its header names the new table."""
    change = entry_pb.RowChange(isDdl=True, sql=sql, eventType=entry_pb.EventType.RENAME)
    header = entry_pb.Header(schemaName=new.schema, tableName=new.table, eventType=entry_pb.EventType.RENAME)
    entry = entry_pb.Entry(header=header, storeValue=change.SerializeToString())
    delivery.statement(new, EntryPosition("bin.1", offset), entry, missed=False)


def delivery_of(windows: Windows, rename_table: str) -> Delivery:
    settings = JobSettings("j", CanalSettings("h", 1, "d"), (ChannelSettings("shop.orders", "lake.shop.orders"),),
                           schema=SchemaSettings(rename_table=rename_table))
    log = structlog.get_logger("test")
    channel = RenamedChannel(settings.channels[0])
    return Delivery(settings, [channel], CommittedPositions(), None, SecondPass(log),  # type: ignore[list-item]
                    ConsumerStats(), log, windows)


def open_window(windows: Windows, delivery: Delivery, table: TableId) -> ChunkWindow:
    window = ChunkWindow("w1", table, ["id"])
    windows.register(window)
    delivery.begin("txn-1")
    delivery.rows(SIGNALS, EntryPosition("bin.1", 10), entry_pb.Entry(
        storeValue=signal("w1", "open").SerializeToString()), missed=False)
    assert window.state is WindowState.OPEN
    return window


def test_a_rename_of_a_table_whose_window_is_open_spoils_it_and_a_followed_one_gives_the_tables_new_name():
    windows = Windows(SIGNALS)
    delivery = delivery_of(windows, "follow")
    window = open_window(windows, delivery, TableId("shop", "orders"))
    rename(delivery, "RENAME TABLE orders TO orders_v2", TableId("shop", "orders_v2"), 20)
    assert window.state is WindowState.SPOILED, "the chunk may hold rows of either name"
    assert windows.current(TableId("shop", "orders")) == TableId("shop", "orders_v2")
    rename(delivery, "ALTER TABLE shop.orders_v2 RENAME TO shop.orders_v3", TableId("shop", "orders_v3"), 30)
    assert windows.current(TableId("shop", "orders")) == TableId("shop", "orders_v3")


def test_a_rename_the_job_does_not_follow_spoils_the_window_and_leaves_the_name_to_the_table_that_takes_it():
    windows = Windows(SIGNALS)
    delivery = delivery_of(windows, "ignore")
    window = open_window(windows, delivery, TableId("shop", "orders"))
    rename(delivery, "RENAME TABLE orders TO orders_old", TableId("shop", "orders_old"), 20)
    assert window.state is WindowState.SPOILED
    assert windows.current(TableId("shop", "orders")) == TableId("shop", "orders")


def test_a_window_that_closes_with_no_channel_for_its_table_is_spoiled_and_the_stream_goes_on():
    windows = Windows(SIGNALS)
    delivery = delivery_of(windows, "ignore")
    window = open_window(windows, delivery, TableId("shop", "payments"))  # (no channel takes it)
    windows.ready(window, SnapshotChunk((SourceColumn("id", "int(11)", 4, True),), [("1",)], 1,
                                        TableProgress("s1", "shop.payments", (1,), (1,))))
    delivery.rows(SIGNALS, EntryPosition("bin.1", 20), entry_pb.Entry(
        storeValue=signal("w1", "close").SerializeToString()), missed=False)
    assert window.state is WindowState.SPOILED, "its snapshot reads the table again, as it is then"


@pytest.mark.parametrize("landed_before", [False, True], ids=["not-in-the-target", "in-the-target-already"])
def test_a_replayed_chunk_whose_rows_were_lost_is_read_again_unless_the_target_held_it(landed_before):
    # (A Spark JVM that died with the rows: adding its handle again would fail every replay.)
    windows = Windows(SIGNALS)
    committed = CommittedPositions()
    settings = JobSettings("j", CanalSettings("h", 1, "d"), (ChannelSettings("shop.orders", "lake.shop.orders"),))
    log = structlog.get_logger("test")
    channel = RenamedChannel(settings.channels[0])
    delivery = Delivery(settings, [channel], committed, None, SecondPass(log),  # type: ignore[list-item]
                        ConsumerStats(), log, windows)
    window = open_window(windows, delivery, TableId("shop", "orders"))
    lost = [False]
    windows.ready(window, SnapshotChunk((SourceColumn("id", "int(11)", 4, True),), [("1",)], 1,
                                        TableProgress("s1", "shop.orders", (1,), (1,)), held=lambda: not lost[0]))
    close = entry_pb.Entry(storeValue=signal("w1", "close").SerializeToString())
    delivery.rows(SIGNALS, EntryPosition("bin.1", 20), close, missed=False)
    assert channel.chunks == [window]
    lost[0] = True  # the JVM died; the commit failed (reporting failure, whether or not it landed)
    if landed_before:
        committed.read_back("shop.orders", EntryPosition("bin.1", 20))
    delivery.aborted()
    delivery.begin("txn-2")
    delivery.rows(SIGNALS, EntryPosition("bin.1", 20), close, missed=False)
    assert channel.chunks == [window], "not added again"
    assert window.state is (WindowState.LANDED if landed_before else WindowState.SPOILED)


def test_a_shard_renamed_within_its_merged_rule_is_not_followed_as_its_channels_table():
    # (The router follows only a channel named for one table: a rule's renamed table is a table of its own.)
    windows = Windows(SIGNALS)
    settings = JobSettings("j", CanalSettings("h", 1, "d"), (RULE,), schema=SchemaSettings(rename_table="follow"))
    log = structlog.get_logger("test")

    def open_channel(settings: ChannelSettings) -> RenamedChannel:
        return RenamedChannel(settings)

    delivery = Delivery(settings, [], CommittedPositions(), open_channel, SecondPass(log),  # type: ignore[arg-type]
                        ConsumerStats(), log, windows)
    window = open_window(windows, delivery, TableId("shop_1", "orders"))
    rename(delivery, "RENAME TABLE shop_1.orders TO shop_9.orders", TableId("shop_9", "orders"), 20)
    assert window.state is WindowState.SPOILED
    assert windows.current(TableId("shop_1", "orders")) == TableId("shop_1", "orders")
    assert windows.gone(TableId("shop_1", "orders"))


def test_a_drop_of_a_table_whose_window_is_open_spoils_it_and_says_the_table_is_gone():
    windows = Windows(SIGNALS)
    delivery = delivery_of(windows, "ignore")
    window = open_window(windows, delivery, TableId("shop", "orders"))
    change = entry_pb.RowChange(isDdl=True, sql="DROP TABLE orders", eventType=entry_pb.EventType.ERASE)
    header = entry_pb.Header(schemaName="shop", tableName="orders", eventType=entry_pb.EventType.ERASE)
    delivery.statement(TableId("shop", "orders"), EntryPosition("bin.1", 20),
                       entry_pb.Entry(header=header, storeValue=change.SerializeToString()), missed=False)
    assert window.state is WindowState.SPOILED and windows.gone(TableId("shop", "orders"))
