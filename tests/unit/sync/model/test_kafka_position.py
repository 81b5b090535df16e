"""Kafka positions order entries within their partition (lane) only, and a cut carries every lane's mark."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from canalbridge.sync.model.position import (
    EntryPosition,
    KafkaPosition,
    LaneMark,
    later,
    position_from_dict,
)
from canalbridge.sync.model.tracking import AckState, CommittedPositions


def flat(lane: str, record: int, index: int = 0, **lanes: LaneMark) -> KafkaPosition:
    """An entry of a flat topic: ordered by its record offset and index in it."""
    return KafkaPosition(lane, record, 1_700_000_000_000, "", lane, index, record + 1,
                         MappingProxyType({name.replace("_", ":"): mark for name, mark in lanes.items()}))


def test_positions_in_one_lane_order_by_record_then_index():
    assert flat("t:0", 5) < flat("t:0", 6) and flat("t:0", 5, 1) > flat("t:0", 5, 0)
    assert flat("t:0", 5, 2) <= flat("t:0", 5, 2) and flat("t:0", 5, 2).same_place(flat("t:0", 5, 2))


def test_an_entry_compares_with_what_another_position_had_read_of_its_lane():
    cut = flat("t:1", 40, t_0=flat("t:0", 7).mark)  # read lane 0 through record 7, then lane 1's record 40
    assert flat("t:0", 7) <= cut and flat("t:0", 8) > cut
    assert not flat("t:0", 6) > cut
    assert flat("t:2", 0) > cut  # a lane the cut had not read: everything in it comes after


def test_protobuf_lanes_order_by_binlog_position_across_files_and_split_rows():
    def entry(journal: str, offset: int, occurrence: int = 0) -> KafkaPosition:
        return KafkaPosition(journal, offset, 0, "", "t:0", occurrence, 9)

    assert entry("mysql-bin.000009", 900) < entry("mysql-bin.000010", 4)
    assert entry("mysql-bin.000010", 4, 0) < entry("mysql-bin.000010", 4, 1)
    assert entry("mysql-bin.000010", 4) > KafkaPosition("", -1, lane="t:0")  # LaneMark.before's place


def test_a_merged_position_holds_each_lane_at_the_further_mark():
    a = flat("t:0", 9, t_1=flat("t:1", 3).mark)
    b = flat("t:1", 5, t_0=flat("t:0", 4).mark, t_2=LaneMark.before(11))
    merged = a.merged(b)
    assert {lane: mark.resume for lane, mark in merged.marks().items()} == {"t:0": 10, "t:1": 6, "t:2": 11}
    assert later(a, b) == merged and later(None, b) == b


def test_committed_and_acked_positions_merge_lanes_and_never_move_back():
    committed = CommittedPositions()
    committed.advance("db.t", flat("t:0", 9))
    committed.advance("db.t", flat("t:1", 2, t_0=flat("t:0", 3).mark))
    done = committed.get("db.t")
    assert done is not None and flat("t:0", 9) <= done and flat("t:1", 2) <= done and flat("t:1", 3) > done
    acks = AckState()
    acks.record(flat("t:0", 9))
    acks.record(flat("t:0", 4))
    assert acks.position == flat("t:0", 9)


def test_binlog_positions_still_take_the_later():
    assert later(EntryPosition("b.000001", 90), EntryPosition("b.000001", 40)) == EntryPosition("b.000001", 90)


@pytest.mark.parametrize("position", [
    flat("orders:2", 41, 3, orders_0=flat("orders:0", 7).mark, orders_1=LaneMark.before(0)),
    KafkaPosition("mysql-bin.000003", 2412, 1_700_000_000_123, "0-1-42", "t:0", 2, 17),
    EntryPosition("mysql-bin.000003", 2412, 1_700_000_000_123, "0-1-42"),
])
def test_positions_read_back_from_the_state_store_form(position):
    assert position_from_dict(position.to_dict()) == position  # (the snapshot summary's: tests/unit/spark_sink)


def test_kafka_positions_can_be_counted_by_position():
    a, b = flat("t:0", 5, t_1=LaneMark.before(3)), flat("t:0", 5, t_1=LaneMark.before(3))
    assert len({a, b, flat("t:0", 6)}) == 2


def test_a_kafka_position_names_its_partition_and_offset():
    assert str(flat("orders:2", 41)) == "orders:2 from offset 42"
    assert str(KafkaPosition("mysql-bin.000003", 2412, lane="t:0", resume=17)) == \
        "t:0 from offset 17 (mysql-bin.000003:2412)"
