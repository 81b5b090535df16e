"""A partition field as Spark's Iceberg DDL takes it, in ``CREATE TABLE ... PARTITIONED BY`` and ``ALTER TABLE ... ADD
PARTITION FIELD`` alike."""

from __future__ import annotations

import pytest

from canalbridge.sync.model.partitions import PartitionField
from spark_sink.table import partition_sql


@pytest.mark.parametrize(("field", "spark"), [
    (PartitionField("identity", "id"), "`id`"),
    (PartitionField("bucket", "id", 16), "bucket(16, `id`)"),
    (PartitionField("truncate", "na`me", 4), "truncate(4, `na``me`)"),
    (PartitionField("year", "created_at"), "years(`created_at`)"),
    (PartitionField("month", "created_at"), "months(`created_at`)"),
    (PartitionField("day", "created_at"), "days(`created_at`)"),
    (PartitionField("hour", "t$1"), "hours(`t$1`)"),
])
def test_each_transform_is_spelled_as_spark_takes_it_and_the_column_quoted(field, spark):
    assert partition_sql(field) == spark
