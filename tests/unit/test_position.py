"""Positions order by journal then offset, without overflow; the meta acks oldest first."""

from __future__ import annotations

import pytest

from canalbridge.sync.position import (
    EntryPosition,
    OutstandingBatch,
    PositionMeta,
    PositionRange,
    format_position_info,
)


def pos(journal: str, offset: int) -> EntryPosition:
    return EntryPosition(journal, offset)


def test_order_is_journal_then_offset():
    assert pos("mysql-bin.000001", 999_999) < pos("mysql-bin.000002", 4)
    assert pos("mysql-bin.000002", 4) < pos("mysql-bin.000002", 5)


def test_offsets_far_apart_do_not_overflow():
    # Doris cast the long difference to int: these two compared the wrong way round.
    low, high = pos("mysql-bin.000001", 1), pos("mysql-bin.000001", 1 + 2**32)
    assert low < high and not high < low


def test_journal_numbers_compare_numerically():
    assert pos("mysql-bin.999999", 4) < pos("mysql-bin.1000000", 4)


def test_execute_time_and_gtid_do_not_affect_order():
    a = EntryPosition("mysql-bin.000001", 10, 1000, "u:1")
    b = EntryPosition("mysql-bin.000001", 10, 2000, "u:2")
    assert a.same_place(b) and a <= b and b <= a


def batch(batch_id: int, start: int, end: int) -> OutstandingBatch:
    return OutstandingBatch(batch_id, PositionRange(pos("f.1", start), pos("f.1", end)), end - start + 1, 10)


def test_ackable_batches_are_the_oldest_wholly_before_the_cut():
    meta = PositionMeta()
    for b in (batch(1, 1, 10), batch(2, 11, 20), batch(3, 21, 30)):
        meta.add_batch(b)
    assert [b.batch_id for b in meta.ackable_through(pos("f.1", 25))] == [1, 2]
    assert meta.ackable_through(pos("f.1", 5)) == []
    meta.mark_acked(meta.ackable_through(pos("f.1", 25)), 5000)
    assert meta.ack_position == pos("f.1", 20) and meta.ack_time_ms == 5000
    assert [b.batch_id for b in meta.outstanding] == [3] and meta.outstanding_entries == 10


def test_batches_must_arrive_in_id_order():
    meta = PositionMeta()
    meta.add_batch(batch(2, 1, 2))
    with pytest.raises(ValueError):
        meta.add_batch(batch(1, 3, 4))


def test_position_info_matches_doris_format():
    assert format_position_info(None, None) == "position:N/A"
    info = format_position_info(EntryPosition("mysql-bin.000001", 4521, 1_700_000_000_000, "u:1-5"), 1_700_000_000_120)
    assert info.startswith("position:[mysql-bin.000001:4521], executeTime:[")
    assert info.endswith("delay:120ms, gtid(u:1-5)")
