"""A channel's ``partition_by``: each entry a column or an Iceberg transform of one, checked as the config loads."""

from __future__ import annotations

import pytest

from canalbridge.sync.model.partitions import PartitionField, PartitionSpecError, partition_fields


@pytest.mark.parametrize(("text", "field"), [
    ("id", PartitionField("identity", "id")),
    ("identity(id)", PartitionField("identity", "id")),
    ("bucket(16, id)", PartitionField("bucket", "id", 16)),
    (" truncate ( 4 , name ) ", PartitionField("truncate", "name", 4)),
    ("DAY(created_at)", PartitionField("day", "created_at")),
    ("hour(t$1)", PartitionField("hour", "t$1")),
])
def test_a_column_or_a_transform_of_one_is_a_partition_field(text, field):
    parsed = PartitionField.parse(text)
    assert parsed == field
    assert PartitionField.parse(str(parsed)) == parsed  # (printed as it is written)


@pytest.mark.parametrize(("text", "says"), [
    ("a b", "neither a column nor a transform of one"),
    ("week(ts)", "week is not a transform"),
    ("bucket(id)", "write bucket(n, col), n a whole number from 1 to 2147483647"),
    ("truncate(0, name)", "write truncate(w, col), w a whole number from 1 to 2147483647"),
    ("bucket(2147483648, id)", "write bucket(n, col), n a whole number from 1 to 2147483647"),
    ("day(a, b)", "write day(col)"),
    ("bucket(16, id", "neither a column nor a transform of one"),
])
def test_anything_else_says_what_is_expected(text, says):
    with pytest.raises(PartitionSpecError, match=says.replace("(", r"\(").replace(")", r"\)")):
        PartitionField.parse(text)


def test_the_setting_takes_a_list_of_distinct_fields():
    assert partition_fields(["bucket(16, id)", "day(created_at)", "created_at"]) is None
    assert partition_fields([]) and partition_fields([3]) and partition_fields(["id", "ID"])
    assert "week is not a transform" in (partition_fields(["id", "week(ts)"]) or "")
    assert partition_fields(["day(ts)", "hour(ts)"]) == "names two of year, month, day and hour of one column: " \
                                                       "Iceberg takes one"
    assert partition_fields(["day(ts)", "hour(other)", "bucket(4, ts)"]) is None
