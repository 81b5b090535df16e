"""A closed window's chunk goes to the channel the stream routes its table to, and lands only with that channel's
commit: for shards merged into one target, the channel named by their pattern."""

from __future__ import annotations

import structlog

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.consumer.delivery import Delivery
from canalbridge.sync.consumer.second_pass import SecondPass
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.stats import ConsumerStats
from canalbridge.sync.model.tables import TableId, TablePattern
from canalbridge.sync.model.tracking import CommittedPositions
from canalbridge.sync.settings import ChannelSettings, JobSettings
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
