"""A target's layout as its channel sets it. Partitions (``partition_by``): made with the spec, or given the
fields they lack without a rewrite; an update that moves a row to another partition leaves one row for its key,
whichever ``upsert_deletes`` the target asks for, and so does a target the user partitioned by hand. Table
properties (``table_properties``): made with them, or set on a target made before."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.sync.model.changes import ChangeKind
from canalbridge.sync.settings import ChannelSettings
from spark_sink.errors import TargetTableError
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from spark_sink.table import TargetTable
from tests.integration.spark.test_equality_deletes import changes, files_by_content
from tests.integration.spark.test_position_readback import JOB, position

INSERT, UPDATE, DELETE = ChangeKind.INSERT, ChangeKind.UPDATE_AFTER, ChangeKind.DELETE


def rows(spark, target: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(f"SELECT id, name FROM {quote_table(target)} ORDER BY id").collect()]


def spec(spark, target: str) -> list[str]:
    return [str(field) for field in TargetTable(spark, target).partition_fields()]


@pytest.mark.parametrize("deletes", ["equality", "position"])
def test_an_update_that_moves_a_row_to_another_partition_leaves_one_row_for_its_key(spark, spark_settings, deletes):
    target = f"lake.partitioned.moves_{deletes}"
    settings = dataclasses.replace(spark_settings, upsert_deletes=deletes)
    sink = make_sink(spark, ChannelSettings("db.t", target, partition_by=("name", "bucket(4, id)")), JOB, settings)
    changes(sink, position(100), *[(INSERT, key, "even" if key % 2 == 0 else "odd") for key in range(1, 9)])
    assert spec(spark, target) == ["name", "bucket(4, id)"]
    partitions = spark.sql(f"SELECT count(*) FROM {quote_table(target)}.partitions").first()[0]
    assert partitions > 2  # (both names, several buckets)

    # Each update moves its row to the other name's partition; one key is deleted, one comes back.
    changes(sink, position(200), (UPDATE, 1, "even"), (UPDATE, 2, "odd"), (DELETE, 3, None), (UPDATE, 4, "odd"))
    changes(sink, position(300), (UPDATE, 1, "odd"), (INSERT, 3, "even"), (UPDATE, 4, "even"))
    assert rows(spark, target) == [(1, "odd"), (2, "odd"), (3, "even"), (4, "even"), (5, "odd"), (6, "even"),
                                   (7, "odd"), (8, "even")]
    assert "equality deletes" not in files_by_content(spark, target), "a partitioned target takes position deletes"


def test_a_target_made_before_gains_the_fields_it_lacks_and_keeps_its_files(spark, spark_settings):
    target = "lake.partitioned.evolved"
    changes(make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings), position(100),
            (INSERT, 1, "a"), (INSERT, 2, "b"))
    assert spec(spark, target) == []

    sink = make_sink(spark, ChannelSettings("db.t", target, partition_by=("bucket(4, id)",)), JOB, spark_settings)
    changes(sink, position(200), (UPDATE, 2, "B"), (INSERT, 3, "c"))
    assert spec(spark, target) == ["bucket(4, id)"]
    specs = {row[0] for row in spark.sql(f"SELECT spec_id FROM {quote_table(target)}.files").collect()}
    assert specs == {0, 1}, "the rows written before stay in their files: nothing was rewritten"
    assert rows(spark, target) == [(1, "a"), (2, "B"), (3, "c")]

    # Named in another case, the field it has is not added again; the one it lacks is, as the table spells it.
    sink = make_sink(spark, ChannelSettings("db.t", target, partition_by=("BUCKET(4, ID)", "truncate(1, NAME)")),
                     JOB, spark_settings)
    changes(sink, position(300), (UPDATE, 3, "C"))
    assert spec(spark, target) == ["bucket(4, id)", "truncate(1, name)"]
    partition = spark.table(f"{quote_table(target)}.partitions").schema["partition"].dataType
    assert partition.fieldNames() == ["id_bucket_4", "name_trunc_1"]  # (as Iceberg names them: read apart from ours)
    assert rows(spark, target) == [(1, "a"), (2, "B"), (3, "C")]


def test_a_target_the_user_partitioned_by_hand_stays_exact_as_rows_move(spark, spark_settings):
    target = "lake.partitioned.by_hand"
    spark.sql(f"CREATE TABLE {target} (id int NOT NULL, name string) USING iceberg PARTITIONED BY (name) "
              "TBLPROPERTIES ('format-version' = '2')")
    spark.sql(f"ALTER TABLE {target} SET IDENTIFIER FIELDS id")
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    changes(sink, position(100), (INSERT, 1, "a"), (INSERT, 2, "b"))
    changes(sink, position(200), (UPDATE, 1, "b"), (UPDATE, 2, "a"))
    assert rows(spark, target) == [(1, "b"), (2, "a")]


def test_a_partition_field_of_no_column_stops_the_target_naming_it(spark, spark_settings):
    target = "lake.partitioned.unknown"
    sink = make_sink(spark, ChannelSettings("db.t", target, partition_by=("day(created_at)",)), JOB, spark_settings)
    with pytest.raises(TargetTableError, match=r"target lake.partitioned.unknown: partition_by's day\(created_at\) "
                                               r"names created_at, which is not one of its columns"):
        changes(sink, position(100), (INSERT, 1, "a"))
    assert not spark.catalog.tableExists(target)


def test_table_properties_are_made_with_the_target_and_set_on_one_made_before(spark, spark_settings):
    made = "lake.partitioned.with_properties"
    wanted = {"write.parquet.compression-codec": "snappy", "commit.retry.num-retries": 7,
              "write.object-storage.enabled": True}
    changes(make_sink(spark, ChannelSettings("db.t", made, table_properties=wanted), JOB, spark_settings),
            position(100), (INSERT, 1, "a"))
    properties = TargetTable(spark, made).properties()
    assert {key: properties[key] for key in wanted} == {"write.parquet.compression-codec": "snappy",
                                                        "commit.retry.num-retries": "7",
                                                        "write.object-storage.enabled": "true"}
    assert properties["canalbridge.primary-key"] == '["id"]' and properties["write.delete.mode"] == "merge-on-read"

    before = "lake.partitioned.properties_later"
    changes(make_sink(spark, ChannelSettings("db.t", before), JOB, spark_settings), position(100), (INSERT, 1, "a"))
    assert "write.metadata.metrics.default" not in TargetTable(spark, before).properties()
    full = {"write.metadata.metrics.default": "full"}
    sink = make_sink(spark, ChannelSettings("db.t", before, table_properties=full), JOB, spark_settings)
    changes(sink, position(200), (INSERT, 2, "b"))
    assert TargetTable(spark, before).properties()["write.metadata.metrics.default"] == "full"
    assert rows(spark, before) == [(1, "a"), (2, "b")]
