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
from spark_sink.maintainer import compact
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
    moved = [(1, "odd"), (2, "odd"), (3, "even"), (4, "even"), (5, "odd"), (6, "even"), (7, "odd"), (8, "even")]
    assert rows(spark, target) == moved
    assert sink.writer.mode.equality_deletes == (deletes == "equality")
    if deletes == "equality":
        # Under an unpartitioned spec of the target's own, where Iceberg applies them in every partition; the
        # rows stay in partitions.
        files = spark.sql(f"SELECT content, spec_id, partition.name AS name FROM {quote_table(target)}.files")
        data = {(row["spec_id"], row["name"] is None) for row in files.where("content = 0").collect()}
        equality_deletes = {(row["spec_id"], row["name"] is None) for row in files.where("content = 2").collect()}
        assert data == {(0, False)} and equality_deletes == {(1, True)}

        # Compaction rewrites the files the deletes apply to, then drops them all, and nothing comes back.
        compact(TargetTable(spark, target))
        assert "equality deletes" not in files_by_content(spark, target)
        assert rows(spark, target) == moved
    else:
        assert "equality deletes" not in files_by_content(spark, target)


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


@pytest.mark.parametrize("deletes", ["equality", "position"])
def test_a_target_the_user_partitioned_by_hand_stays_exact_as_rows_move(spark, spark_settings, deletes):
    target = f"lake.partitioned.by_hand_{deletes}"
    spark.sql(f"CREATE TABLE {target} (id int NOT NULL, name string) USING iceberg PARTITIONED BY (name) "
              "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')")
    spark.sql(f"ALTER TABLE {target} SET IDENTIFIER FIELDS id")
    settings = dataclasses.replace(spark_settings, upsert_deletes=deletes)
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, settings)
    changes(sink, position(100), (INSERT, 1, "a"), (INSERT, 2, "b"))
    changes(sink, position(200), (UPDATE, 1, "b"), (UPDATE, 2, "a"))
    assert rows(spark, target) == [(1, "b"), (2, "a")]
    assert ("equality deletes" in files_by_content(spark, target)) == (deletes == "equality")


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

    # Its format is upgraded, never downgraded.
    three = make_sink(spark, ChannelSettings("db.t", before, table_properties={"format-version": 3}), JOB,
                      spark_settings)
    changes(three, position(300), (UPDATE, 2, "B"))
    assert TargetTable(spark, before).properties()["format-version"] == "3"
    two = make_sink(spark, ChannelSettings("db.t", before, table_properties={"format-version": "2"}), JOB,
                    spark_settings)
    with pytest.raises(TargetTableError, match=r"target lake.partitioned.properties_later: table_properties' "
                                               r"format-version is 2, and the target is format 3: Iceberg does not "
                                               r"downgrade a table, nor rebuild it at a lower format; set 3"):
        changes(two, position(400), (INSERT, 3, "c"))
    assert rows(spark, before) == [(1, "a"), (2, "B")]

    # A rebuild makes it anew at its format, which Iceberg would not lower, unless the channel names one.
    plain = make_sink(spark, ChannelSettings("db.t", before), JOB, spark_settings)
    assert plain.state.mark_rebuild()
    rebuilt = make_sink(spark, ChannelSettings("db.t", before), JOB, spark_settings)
    assert rebuilt.state.read_state().rebuild
    changes(rebuilt, position(500), (INSERT, 5, "e"))
    assert rows(spark, before) == [(5, "e")]
    assert TargetTable(spark, before).properties()["format-version"] == "3"


@pytest.mark.parametrize("deletes", ["equality", "position"])
def test_a_format_3_target_stays_exact_as_rows_move_across_partitions(spark, spark_settings, deletes):
    target = f"lake.partitioned.format_3_{deletes}"
    channel = ChannelSettings("db.t", target, partition_by=("name",), table_properties={"format-version": 3})
    sink = make_sink(spark, channel, JOB, dataclasses.replace(spark_settings, upsert_deletes=deletes))
    changes(sink, position(100), (INSERT, 1, "a"), (INSERT, 2, "b"), (INSERT, 3, "a"))
    changes(sink, position(200), (UPDATE, 1, "b"), (UPDATE, 2, "a"), (DELETE, 3, None))
    assert rows(spark, target) == [(1, "b"), (2, "a")]
    assert TargetTable(spark, target).properties()["format-version"] == "3"
    deleted = spark.sql(f"SELECT DISTINCT content, file_format FROM {quote_table(target)}.files WHERE content > 0")
    # (position deletes as format 3 writes them: deletion vectors, in Puffin files)
    assert {tuple(row) for row in deleted.collect()} == ({(2, "PARQUET")} if deletes == "equality" else
                                                         {(1, "PUFFIN")})


def test_a_sort_order_is_given_to_the_target_and_compaction_writes_files_sorted_by_it(spark, spark_settings):
    target = "lake.sorted.t"
    changes(make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings), position(100), (INSERT, 1, "a"))
    assert TargetTable(spark, target).sort_fields() == []

    sink = make_sink(spark, ChannelSettings("db.t", target, sort_by=("NAME desc", "id")), JOB, spark_settings)
    changes(sink, position(200), *[(INSERT, key, f"n{key % 3}") for key in range(2, 40)])
    changes(sink, position(300), (UPDATE, 2, "n9"), (UPDATE, 39, "n0"))
    table = TargetTable(spark, target)
    assert [str(field) for field in table.sort_fields()] == ["name DESC NULLS LAST", "id ASC NULLS FIRST"]
    # Each task's rows sorted, with no range shuffle of every commit's rows.
    assert table.properties()["write.distribution-mode"] == "hash"
    before = rows(spark, target)

    def data_files() -> dict[str, int]:
        files = spark.sql(f"SELECT file_path, sort_order_id FROM {quote_table(target)}.files WHERE content = 0")
        return {row["file_path"]: row["sort_order_id"] for row in files.collect()}

    # Equality-delete commits write the rows as they come, and say so (order 0: unsorted); compaction writes
    # them sorted.
    assert set(data_files().values()) == {0}
    compact(table)
    assert rows(spark, target) == before
    sorted_files = [path for path, order in data_files().items() if order == 1]
    assert sorted_files, "the files the deletes applied to are rewritten sorted"
    for path in sorted_files:
        held = [(row["name"], row["id"]) for row in spark.read.parquet(path).collect()]
        by_id = sorted(held, key=lambda row: row[1])
        assert held == sorted(by_id, key=lambda row: row[0], reverse=True)  # (a stable sort: by id within a name)

    # A changed setting changes the order; the files written before keep theirs.
    sink = make_sink(spark, ChannelSettings("db.t", target, sort_by=("id",)), JOB, spark_settings)
    changes(sink, position(400), (INSERT, 40, "n1"))
    assert [str(field) for field in table.sort_fields()] == ["id ASC NULLS FIRST"]
