"""The upsert writer's position-delete commit (``[spark] upsert_deletes = "position"``): delete and insert on
the job's branch, then main fast-forwarded to it."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.sync.errors import TargetKeyMismatchError
from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch
from canalbridge.sync.settings import ChannelSettings
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from spark_sink.table import TargetColumn, TargetTable
from tests.integration.spark.test_position_readback import COLUMNS, JOB, commit, position


@pytest.fixture
def position_settings(spark_settings):
    return dataclasses.replace(spark_settings, upsert_deletes="position")


def rows(spark, target: str) -> list[tuple]:
    return [tuple(row) for row in spark.table(quote_table(target)).orderBy("id").collect()]


def test_what_a_failed_commit_left_on_the_branch_never_reaches_main(spark, position_settings):
    target = "lake.upsert_branch.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, position_settings)
    commit(sink, "l1", position(100), (1, "a"), (2, "b"))
    # A commit that wrote to the branch and died before its fast-forward.
    spark.sql(f"INSERT INTO {quote_table(target)}.`branch_canalbridge-staging-{JOB}` VALUES (66, 'half')")
    commit(sink, "l2", position(200), (2, "B"), (3, "c"))
    assert rows(spark, target) == [(1, "a"), (2, "B"), (3, "c")]
    assert sink.state.read_state().position == position(200)


def test_a_new_tables_first_commit_that_failed_after_making_the_branch_is_replayed(spark, position_settings):
    # (An executor lost mid-commit: main has no snapshot yet, and Iceberg replaces a branch only with one.)
    target = "lake.upsert_branch.first"
    TargetTable(spark, target).create([TargetColumn("id", "int", True), TargetColumn("name", "string")], ["id"])
    branch = f"`branch_canalbridge-staging-{JOB}`"
    spark.sql(f"ALTER TABLE {quote_table(target)} CREATE BRANCH `canalbridge-staging-{JOB}`")
    spark.sql(f"INSERT INTO {quote_table(target)}.{branch} VALUES (66, 'half')")
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, position_settings)
    commit(sink, "l1", position(100), (1, "a"))
    assert rows(spark, target) == [(1, "a")]


@pytest.mark.parametrize("deletes", ["position", "equality"])
def test_commits_on_main_by_another_writer_are_kept(spark, spark_settings, deletes):
    target = f"lake.upsert_other_writer.{deletes}"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB,
                     dataclasses.replace(spark_settings, upsert_deletes=deletes))
    commit(sink, "l1", position(100), (1, "a"))
    spark.sql(f"INSERT INTO {quote_table(target)} VALUES (9, 'by hand')")  # main moves past the branch
    commit(sink, "l2", position(200), (1, "A"), (2, "b"))
    assert rows(spark, target) == [(1, "A"), (2, "b"), (9, "by hand")]
    assert sink.state.read_state().position == position(200)


def test_a_target_column_outside_the_mapping_keeps_its_value_on_update(spark, position_settings):
    target = "lake.upsert_unmapped.t"
    TargetTable(spark, target).create(
        [TargetColumn("id", "int", True), TargetColumn("name", "string"), TargetColumn("note", "string")], ["id"])
    spark.sql(f"INSERT INTO {quote_table(target)} VALUES (1, 'a', 'kept')")
    sink = make_sink(spark, ChannelSettings("db.t", target, columns=("id", "name")), JOB, position_settings)
    commit(sink, "l1", position(100), (1, "A"), (2, "b"))
    assert rows(spark, target) == [(1, "A", "kept"), (2, "b", None)]


def test_a_copy_on_write_target_gets_a_note_its_commits_grow_with_the_table(spark, position_settings):
    created = make_sink(spark, ChannelSettings("db.t", "lake.upsert_layout.created"), JOB, position_settings)
    commit(created, "l1", position(100), (1, "a"))
    assert created.writer.layout_note() is None
    target = "lake.upsert_layout.by_hand"
    spark.sql(f"CREATE TABLE {quote_table(target)} (id int NOT NULL, name string) USING iceberg")
    by_hand = make_sink(spark, ChannelSettings("db.t", target), JOB, position_settings)
    commit(by_hand, "l1", position(100), (1, "a"))
    assert "write.delete.mode is copy-on-write" in (by_hand.writer.layout_note() or "")
    assert rows(spark, target) == [(1, "a")]


def held_rdds(spark) -> set[int]:
    """Ids of the RDDs Spark's block manager holds (persisted or locally checkpointed)."""
    return {int(rdd_id) for rdd_id in spark.sparkContext._jsc.getPersistentRDDs().keySet().toArray()}


def test_a_commit_computes_its_changes_once_and_releases_them_whatever_the_outcome(
        spark, position_settings, monkeypatch):
    target = "lake.upsert_held.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, position_settings)
    before = held_rdds(spark)
    held_during: list[set[int]] = []
    fast_forward = sink.writer.table.fast_forward_main

    def watching_fast_forward(branch: str) -> None:
        held_during.append(held_rdds(spark) - before)
        fast_forward(branch)

    monkeypatch.setattr(sink.writer.table, "fast_forward_main", watching_fast_forward)
    commit(sink, "l1", position(100), (1, "a"), (2, "b"))
    assert len(held_during[0]) == 1  # the changes, held while the DELETE and INSERT read them
    assert held_rdds(spark) - before == set()

    def failing_fast_forward(branch: str) -> None:
        raise RuntimeError("main moved")

    monkeypatch.setattr(sink.writer.table, "fast_forward_main", failing_fast_forward)
    with pytest.raises(RuntimeError, match="main moved"):
        commit(sink, "l2", position(200), (2, "B"))
    assert held_rdds(spark) - before == set()
    assert rows(spark, target) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize("configured", [False, True], ids=["source-key", "channel-key"])
def test_rows_keyed_otherwise_than_the_target_pause_rather_than_upsert(spark, position_settings, configured):
    """Issue 33, hole 2 after a restart: a fresh mapper learns the rows' key; one that is not the key the
    target records (a key change behind where the job resumed, or a channel's key setting changed) pauses
    the job, naming both, before anything is written."""
    target = f"lake.upsert_key_mismatch.{'channel' if configured else 'source'}"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, position_settings)
    commit(sink, "l1", position(100), (1, "a"))
    # Restarted: now the rows say (id, name), by Canal's isKey flags or by the channel's own key.
    key = ("id", "name") if configured else None
    restarted = make_sink(spark, ChannelSettings("db.t", target, key=key), JOB, position_settings)
    restarted.writer.begin()
    restarted.writer.send(RowBatch("db.t", ("id", "name"), COLUMNS, (0, 1),
                            (ChangeRow(ChangeKind.INSERT, ("1", "b"), position(200)),)))
    with pytest.raises(TargetKeyMismatchError, match=r"keyed by \(id, name\), but target .* by \(id\)") as raised:
        restarted.writer.seal().apply(position(200), "l2")
    assert ("channel's key setting" in str(raised.value)) is configured
    assert rows(spark, target) == [(1, "a")]
    assert restarted.state.read_state().position == position(100)


def test_a_composite_key_named_in_another_order_is_the_same_key(spark, position_settings):
    target = "lake.upsert_key_order.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, position_settings)
    batch = RowBatch("db.t", ("id", "name"), COLUMNS, (0, 1),
                     (ChangeRow(ChangeKind.INSERT, ("1", "a"), position(100)),))
    sink.writer.begin()
    sink.writer.send(batch)
    sink.writer.commit(position(100), "l1")
    restarted = make_sink(spark, ChannelSettings("db.t", target), JOB, position_settings)
    restarted.writer.begin()  # (a DDL names the key (name, id); Canal's rows flag it in column order)
    restarted.writer.send(dataclasses.replace(batch, key_indexes=(1, 0),
                                       rows=(ChangeRow(ChangeKind.INSERT, ("1", "b"), position(200)),)))
    restarted.writer.commit(position(200), "l2")
    assert sorted(rows(spark, target)) == [(1, "a"), (1, "b")]
