"""Where the positions of one epoch go back (Canal's second pass), and where they cannot have."""

from __future__ import annotations

import pytest

from canalbridge.sync.consumer.stream_order import StreamOrder
from canalbridge.sync.errors import SourceSwitchedError
from canalbridge.sync.model.position import EntryPosition


def at(offset: int, journal: str = "mysql-bin.000001") -> EntryPosition:
    return EntryPosition(journal, offset, 0)


def routed(order: StreamOrder, *transactions: tuple[int, int]) -> None:
    """Route transactions of one row each: (row offset, end offset)."""
    for row, end in transactions:
        assert order.advance(at(row)) is None
        order.rows()
        assert order.advance(at(end)) is None
        order.transaction_end(at(end))


def test_positions_that_grow_never_went_back_and_the_next_file_of_the_binlog_is_the_same_binlog():
    order = StreamOrder("job")
    routed(order, (100, 200), (300, 400))
    assert order.advance(at(4, "mysql-bin.000002")) is None


def test_a_position_before_the_latest_went_back_to_it():
    order = StreamOrder("job")
    routed(order, (100, 200), (300, 400))
    assert order.advance(at(250)) == at(400)


def test_going_back_before_the_third_last_transaction_end_that_closed_rows_is_another_binlog():
    order = StreamOrder("job")
    routed(order, (100, 200), (300, 400), (500, 600))
    assert order.advance(at(200)) == at(600)  # (Canal's recorded end may trail by two)
    with pytest.raises(SourceSwitchedError):
        order.advance(at(150))


def test_a_transaction_end_that_closed_no_rows_does_not_count():
    order = StreamOrder("job")
    routed(order, (100, 200), (300, 400), (500, 600))
    for end in (700, 800, 900):
        assert order.advance(at(end)) is None
        order.transaction_end(at(end))
    assert order.advance(at(200)) == at(900)


def test_a_binlog_file_of_another_name_is_another_binlog():
    order = StreamOrder("job")
    routed(order, (100, 200))
    with pytest.raises(SourceSwitchedError):
        order.advance(at(300, "other-bin.000001"))


def test_a_new_epoch_starts_from_nothing():
    order = StreamOrder("job")
    routed(order, (100, 200), (300, 400), (500, 600))
    order.new_epoch()
    assert order.advance(at(50)) is None
