"""Positions order by journal then offset, without overflow, and own their serialised form."""

from __future__ import annotations

import pytest

from canalbridge.sync.consumer.taken import BatchPositions
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.tracking import CommittedPositions, format_position_info


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
    assert pos("mysql-bin.1000000", 4) >= pos("mysql-bin.999999", 9) > pos("mysql-bin.999999", 8)


def test_order_is_not_a_tuples_order():
    # A tuple would compare the journal names as text, and 9 before 10 fails there.
    assert sorted([pos("mysql-bin.10", 4), pos("mysql-bin.9", 8), pos("mysql-bin.9", 5)]) == [
        pos("mysql-bin.9", 5), pos("mysql-bin.9", 8), pos("mysql-bin.10", 4)]
    assert max(pos("mysql-bin.10", 4), pos("mysql-bin.9", 8)) == pos("mysql-bin.10", 4)


def test_taken_positions_count_those_at_or_after_a_position():
    taken = BatchPositions()
    for position in (pos("mysql-bin.9", 100), pos("mysql-bin.10", 4), pos("mysql-bin.9", 50), pos("mysql-bin.10", 90)):
        taken.append(position)
    assert taken.count_from(pos("mysql-bin.9", 100)) == 3
    assert taken.count_from(pos("mysql-bin.10", 5)) == 1
    assert taken.count_from(pos("mysql-bin.9", 4)) == 4


def test_execute_time_and_gtid_do_not_affect_order():
    a = EntryPosition("mysql-bin.000001", 10, 1000, "u:1")
    b = EntryPosition("mysql-bin.000001", 10, 2000, "u:2")
    assert a.same_place(b) and a <= b and b <= a


def test_a_position_survives_its_serialised_form_also_as_strings():
    position = EntryPosition("mysql-bin.000007", 2**40, 1_700_000_000_000, "0-1-5")
    assert EntryPosition.from_dict(position.to_dict()) == position
    assert EntryPosition.from_dict({k: str(v) for k, v in position.to_dict().items()}) == position


@pytest.mark.parametrize(
    "entry, acked, another_binlog",
    [
        (pos("mysql-bin.000009", 4), pos("mysql-bin.000009", 900), False),  # re-delivery in the same file
        (pos("mysql-bin.000008", 4), pos("mysql-bin.000009", 900), False),  # Canal's saved cursor one file behind
        (pos("mysql-bin.000003", 4), pos("mysql-bin.000009", 900), True),  # a failover's fresh binlog
        (pos("mariadb-bin.000012", 4), pos("mysql-bin.000009", 900), True),  # another server's naming
        (pos("mysql-bin.000010", 4), pos("mysql-bin.000009", 900), False),  # simply later
    ],
)
def test_an_entry_from_another_binlog_is_told_from_a_re_delivery(entry, acked, another_binlog):
    assert entry.from_another_binlog_than(acked) is another_binlog


def test_committed_positions_only_move_forward():
    committed = CommittedPositions()
    committed.advance("db.t", pos("f.1", 20))
    committed.advance("db.t", pos("f.1", 10))
    committed.advance("db.t", None)
    assert committed.get("db.t") == pos("f.1", 20) and committed.get("db.u") is None


def test_position_info_matches_doris_format():
    assert format_position_info(None, None) == "position:N/A"
    info = format_position_info(EntryPosition("mysql-bin.000001", 4521, 1_700_000_000_000, "u:1-5"), 1_700_000_000_120)
    # (Doris shows the host's local time with no zone; every time canalbridge shows is ISO 8601 in UTC.)
    assert info == "position:[mysql-bin.000001:4521], executeTime:[2023-11-14T22:13:20Z], delay:120ms, gtid(u:1-5)"
