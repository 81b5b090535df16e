"""A target table's snapshot summary carries the channel's position as text, and gives it back whole."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from canalbridge.sync.model.position import EntryPosition, KafkaPosition, LaneMark
from spark_sink.stamp import position_from_summary, position_properties


@pytest.mark.parametrize("position", [
    KafkaPosition("orders:2", 41, 1_700_000_000_000, "", "orders:2", 3, 42,
                  MappingProxyType({"orders:0": LaneMark("orders:0", 7, 0, 8), "orders:1": LaneMark.before(0)})),
    KafkaPosition("mysql-bin.000003", 2412, 1_700_000_000_123, "0-1-42", "t:0", 2, 17),
    EntryPosition("mysql-bin.000003", 2412, 1_700_000_000_123, "0-1-42"),
])
def test_positions_read_back_from_a_snapshot_summary(position):
    summary = position_properties("job", "job-1", position)
    assert all(isinstance(value, str) for value in summary.values())
    assert position_from_summary(summary) == position
