"""What the Consumer took in an epoch and has not acked, and its acks, asked in that epoch only."""

from __future__ import annotations

from canalbridge.canal import CanalBatch
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.consumer.taken import STARVED_AFTER_S, Taken
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.source.link import Outstanding, TakenBatch


class Link:
    """A link that hands out what it is given and records the acks asked of it."""

    resends_in_stream = True
    marks_transactions = True

    def __init__(self) -> None:
        self.epoch = 1
        self.queue: list[TakenBatch] = []
        self.asked: list[tuple[str, int, object]] = []
        self.through = 0  # how many batches the next ack_through says it acks

    def is_current(self, epoch: int) -> bool:
        return epoch == self.epoch

    def take(self, timeout_s: float) -> TakenBatch | None:
        return self.queue.pop(0) if self.queue else None

    def supersede(self, epoch: int, batch_id: int, counts_through: Position | None) -> None:
        self.asked.append(("supersede", epoch, (batch_id, counts_through)))

    def ack_through(self, epoch: int, cut: Position | None) -> int:
        self.asked.append(("ack_through", epoch, cut))
        return self.through

    def rollback(self) -> int:
        self.epoch += 1
        return self.epoch

    @property
    def outstanding(self) -> Outstanding:
        return Outstanding(0, 0)


def at(offset: int) -> EntryPosition:
    return EntryPosition("mysql-bin.000001", offset, 0)


def batch(epoch: int, batch_id: int) -> TakenBatch:
    return TakenBatch(CanalBatch(batch_id, [], 0), epoch, batch_id)


def test_acks_are_asked_in_the_epoch_taken_and_forget_the_oldest_batches():
    link = Link()
    taken = Taken(link)
    for offsets in ((100, 200), (300, 400)):
        positions = taken.new_batch()
        for offset in offsets:
            positions.append(at(offset))
    assert taken.count_from(at(200)) == 3
    link.through = 1
    assert taken.ack_through(at(200)) == 1
    assert link.asked == [("ack_through", 1, at(200))]
    assert taken.count_from(at(200)) == 2, "the acked batch no longer counts"
    taken.new_epoch(link.rollback())
    taken.supersede(7, at(500))
    taken.ack_through(at(500))
    assert link.asked[-2:] == [("supersede", 2, (7, at(500))), ("ack_through", 2, at(500))]
    assert taken.count_from(at(0)) == 0, "nothing was taken in the new epoch"


def test_the_link_is_current_until_it_rolls_back_under_the_epoch():
    link = Link()
    taken = Taken(link)
    assert taken.current
    link.rollback()
    assert not taken.current


def test_the_first_batch_of_a_new_epoch_is_taken_before_the_links_next():
    link = Link()
    taken = Taken(link)
    first, second = batch(2, 1), batch(2, 2)
    link.queue.append(second)
    taken.new_epoch(2, first)
    assert taken.take(0.0) is first
    assert taken.take(0.0) is second
    assert taken.take(0.0) is None


def test_a_cut_carries_the_rest_of_its_batch_once_unless_the_source_sends_it_again():
    taken = Taken(Link())
    taken.new_batch()
    first, rest = entry_pb.Entry(), entry_pb.Entry(entryType=entry_pb.EntryType.ROWDATA)
    taken.cut_after([first, rest], [at(100), at(200)], 0, 7)
    assert taken.carries
    carried = taken.carried()
    assert carried is not None
    assert (carried.entries, carried.positions, carried.batch_id) == ([rest], [at(200)], 7)
    assert taken.carried() is None, "carried once"
    taken.cut_after([first, rest], None, 0, 8)
    taken.forget()  # (Canal was rolled back under the transaction)
    assert taken.carried() is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_source_is_starved_once_it_handed_out_nothing_and_no_ack_made_room_for_a_while():
    link, clock = Link(), Clock()
    taken = Taken(link, clock)
    clock.now += STARVED_AFTER_S - 0.01
    assert taken.take(0.0) is None
    assert not taken.starved
    clock.now += 0.01
    assert taken.starved
    link.queue.append(batch(1, 1))
    assert taken.take(0.0) is not None
    assert not taken.starved, "a batch was handed out"
    clock.now += STARVED_AFTER_S
    assert taken.starved
    taken.ack_through(at(100))
    assert not taken.starved, "the room an ack makes takes a round trip to show"
