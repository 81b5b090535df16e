"""``[spark] upsert_deletes = "equality"``: upsert commits as equality deletes and new rows in one RowDelta,
with no read of the target, exact as today's path (a whole workload: test_sync_into_iceberg; steps of one
commit: test_held_steps; the real stack: the peers benchmark's smoke test)."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch, SourceColumn
from canalbridge.sync.settings import ChannelSettings
from spark_sink import catalog_commit
from spark_sink.identifiers import quote_table
from spark_sink.maintainer import compact
from spark_sink.sink import make_sink
from spark_sink.table import TargetTable
from tests.integration.spark.test_position_readback import COLUMNS, JOB, commit, position


@pytest.fixture
def equality_settings(spark_settings):
    return dataclasses.replace(spark_settings, upsert_deletes="equality")


def files_by_content(spark, target: str) -> dict[str, int]:
    names = {0: "data", 1: "position deletes", 2: "equality deletes"}
    rows = spark.sql(f"SELECT content, count(*) AS n FROM {quote_table(target)}.files GROUP BY content").collect()
    return {names[row["content"]]: row["n"] for row in rows}


def changes(sink, end, *rows: tuple[ChangeKind, int, str | None]) -> None:
    """One transaction of ``(kind, id, name)`` changes through the sink, as a channel runs it."""
    sink.writer.begin()
    sink.writer.send(RowBatch("db.t", ("id", "name"), COLUMNS, (0,), tuple(
        ChangeRow(kind, (str(key), name), end) for kind, key, name in rows)))
    sink.writer.commit(end, f"at-{end.offset}")


def test_updates_deletes_and_key_changes_across_commits_leave_each_key_once(spark, equality_settings):
    target = "lake.equality_keys.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, equality_settings)
    changes(sink, position(100), (ChangeKind.INSERT, 1, "a"), (ChangeKind.INSERT, 2, "b"),
            (ChangeKind.INSERT, 3, "c"))
    # 1 updated twice, 2 deleted, 3 moved to key 4: only a key's last change counts.
    changes(sink, position(200), (ChangeKind.UPDATE_AFTER, 1, "a1"), (ChangeKind.UPDATE_AFTER, 1, "a2"),
            (ChangeKind.DELETE, 2, "b"), (ChangeKind.UPDATE_BEFORE, 3, None), (ChangeKind.UPDATE_AFTER, 4, "c"))
    # A commit of deletes alone (no data file), then the deleted key back.
    changes(sink, position(300), (ChangeKind.DELETE, 1, "a2"))
    changes(sink, position(400), (ChangeKind.INSERT, 2, "b again"))
    assert [tuple(r) for r in spark.table(quote_table(target)).orderBy("id").collect()] == [(2, "b again"),
                                                                                            (4, "c")]
    assert sink.state.read_state().position == position(400)
    assert sink.writer.mode.equality_deletes
    files = files_by_content(spark, target)  # (a commit writes a file per Spark task that had its rows)
    assert set(files) == {"data", "equality deletes"} and files["data"] >= 3 and files["equality deletes"] >= 4


def test_a_target_that_cannot_take_equality_deletes_keeps_the_position_path(spark, equality_settings):
    target = "lake.equality_format_1.t"
    spark.sql(f"CREATE TABLE {quote_table(target)} (id int NOT NULL, name string) USING iceberg "
              "TBLPROPERTIES ('format-version' = '1')")
    spark.sql(f"ALTER TABLE {quote_table(target)} SET IDENTIFIER FIELDS id")
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, equality_settings)
    commit(sink, "l1", position(100), (1, "a"), (2, "b"))
    commit(sink, "l2", position(200), (2, "B"))
    assert [tuple(r) for r in spark.table(quote_table(target)).orderBy("id").collect()] == [(1, "a"), (2, "B")]
    assert "equality deletes" not in files_by_content(spark, target) and not sink.writer.mode.equality_deletes
    assert sink.state.read_state().position == position(200)


TWO_KEYS = (SourceColumn("id", "bigint(20)", -5, True), SourceColumn("tenant", "bigint(20)", -5, True),
            SourceColumn("name", "varchar(32)", 12, False))


def test_a_key_named_in_another_order_than_the_tables_columns_deletes_the_right_rows(spark, equality_settings):
    """The delete file holds the key in the table's column order, whatever order the channel names it in:
    two BIGINT columns swapped would delete (tenant=id, id=tenant) and keep every old row."""
    target = "lake.equality_key_order.t"
    sink = make_sink(spark, ChannelSettings("db.t", target, key=("tenant", "id")), JOB, equality_settings)

    def send(end, *rows: tuple[ChangeKind, int, int, str]) -> None:
        sink.writer.begin()
        sink.writer.send(RowBatch("db.t", ("id", "tenant", "name"), TWO_KEYS, (1, 0), tuple(
            ChangeRow(kind, (str(key), str(tenant), name), end) for kind, key, tenant, name in rows)))
        sink.writer.commit(end, f"at-{end.offset}")

    send(position(100), (ChangeKind.INSERT, 1, 2, "a"), (ChangeKind.INSERT, 2, 1, "b"))
    send(position(200), (ChangeKind.UPDATE_AFTER, 1, 2, "a2"))
    assert sink.writer.mode.equality_deletes
    assert [tuple(r) for r in spark.table(quote_table(target)).orderBy("id").collect()] == [(1, 2, "a2"),
                                                                                            (2, 1, "b")]


def test_compaction_leaves_no_equality_delete_and_the_same_rows(spark, equality_settings):
    """Iceberg's thresholds alone never rewrite a file for equality deletes (fewer than five small files here
    would not even be grouped): the daemon's compaction rewrites every file they apply to, and drops them."""
    target = "lake.equality_compacted.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, equality_settings)
    changes(sink, position(100), *[(ChangeKind.INSERT, key, f"v{key}") for key in range(20)])
    changes(sink, position(200), (ChangeKind.UPDATE_AFTER, 3, "w3"), (ChangeKind.DELETE, 4, None))
    changes(sink, position(300), (ChangeKind.UPDATE_AFTER, 5, "w5"))
    expected = [tuple(r) for r in spark.table(quote_table(target)).orderBy("id").collect()]
    assert len(expected) == 19 and "equality deletes" in files_by_content(spark, target)
    compact(TargetTable(spark, target))
    assert [tuple(r) for r in spark.table(quote_table(target)).orderBy("id").collect()] == expected
    assert set(files_by_content(spark, target)) == {"data"}
    assert sink.state.read_state().position == position(300)


def test_a_staged_commit_leaves_main_as_it_was_and_a_catalog_without_multi_table_commits_never_takes_it(
        spark, equality_settings):
    target = f"{equality_settings.catalog}.equality.staged"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, equality_settings)
    changes(sink, position(100), (ChangeKind.INSERT, 1, "a"))
    before = TargetTable(spark, target).iceberg_table().currentSnapshot().snapshotId()

    sink.writer.begin()
    sink.writer.send(RowBatch("db.t", ("id", "name"), COLUMNS, (0,), (
        ChangeRow(ChangeKind.INSERT, ("2", "b"), position(200)),)))
    staged = sink.writer.seal().stage(position(200), "at-200")
    assert staged is not None and staged.target == quote_table(target) and staged.snapshot_id != before
    assert TargetTable(spark, target).iceberg_table().currentSnapshot().snapshotId() == before

    # A Hadoop catalog has no multi-table commit: nothing is sent, and trying again cannot help.
    with pytest.raises(catalog_commit.PublishError, match=rf"{equality_settings.catalog} cannot commit several "
                                                          r"tables at once: it is not an Iceberg REST catalog") as no:
        catalog_commit.publish(spark, [staged])
    assert no.value.refused and not no.value.transient
    staged.discard()
    assert [tuple(row) for row in spark.sql(f"SELECT id, name FROM {quote_table(target)}").collect()] == [(1, "a")]
