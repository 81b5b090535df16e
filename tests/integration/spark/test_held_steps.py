"""Issue 33, hole 5: a channel commit applied in steps (rows of two column layouts in one source
transaction) reaches main in one snapshot change, through the job's branch, in every write path."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch
from canalbridge.sync.settings import ChannelSettings
from spark_sink.errors import ValueConversionError
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from spark_sink.table import TargetColumn, TargetTable
from tests.integration.spark.test_position_readback import COLUMNS, JOB, commit, position

PATHS = {  # a write path -> the channel that takes it
    "position": ChannelSettings("db.t", "lake.held_steps.position"),  # upsert_deletes = "position"
    "equality": ChannelSettings("db.t", "lake.held_steps.equality"),  # upsert_deletes = "equality"
    "merge": ChannelSettings("db.t", "lake.held_steps.merge", columns=("id", "name")),  # a column left unmapped
    "changelog": ChannelSettings("db.t", "lake.held_steps.changelog", mode="changelog"),
}


def staged(sink, *rows: tuple[str, str]):
    """One step's rows, sealed as the channel seals them."""
    changes = tuple(ChangeRow(ChangeKind.INSERT, (key, name), position(1)) for key, name in rows)
    sink.writer.begin()
    sink.writer.send(RowBatch("db.t", ("id", "name"), COLUMNS, (0,), changes))
    return sink.writer.seal()


def visible(spark, target: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(f"SELECT id, name FROM {quote_table(target)} ORDER BY id").collect()]


def made_current(spark, target: str) -> int:
    """How many snapshots were ever current on main."""
    return spark.sql(f"SELECT * FROM {quote_table(target)}.history").count()


@pytest.mark.parametrize("path", PATHS)
def test_held_steps_reach_main_together_and_a_failed_step_drops_them(spark, spark_settings, path):
    channel = PATHS[path]
    if path == "merge":
        TargetTable(spark, channel.target).create(
            [TargetColumn("id", "int", True), TargetColumn("name", "string"), TargetColumn("note", "string")],
            ["id"])
    if path in ("position", "equality"):
        spark_settings = dataclasses.replace(spark_settings, upsert_deletes=path)
    sink = make_sink(spark, channel, JOB, spark_settings)
    commit(sink, "c1", position(100), (1, "a"))
    before = made_current(spark, channel.target)

    staged(sink, ("2", "b")).apply(position(200), "c2~1", publish=False)
    assert visible(spark, channel.target) == [(1, "a")]
    assert sink.state.read_state().position == position(100)
    staged(sink, ("3", "c")).apply(position(300), "c2", publish=True)
    assert visible(spark, channel.target) == [(1, "a"), (2, "b"), (3, "c")]
    assert made_current(spark, channel.target) == before + 1  # one move of main for both steps
    state = sink.state.read_state()
    assert (state.position, state.label) == (position(300), "c2")

    staged(sink, ("4", "d")).apply(position(400), "c3~1", publish=False)
    with pytest.raises(ValueConversionError):
        staged(sink, ("not a number", "e")).apply(position(500), "c3", publish=True)
    assert visible(spark, channel.target) == [(1, "a"), (2, "b"), (3, "c")]
    # The replay of the failed commit: what the first try held stays out.
    staged(sink, ("5", "f")).apply(position(500), "c3", publish=True)
    assert visible(spark, channel.target) == [(1, "a"), (2, "b"), (3, "c"), (5, "f")]
    state = sink.state.read_state()
    assert (state.position, state.label) == (position(500), "c3")
    assert getattr(sink.writer.mode, "equality_deletes", False) is (path == "equality")


def test_a_commit_behind_the_tables_position_keeps_where_it_reached(spark, spark_settings):
    """Issue 33, hole 7: a commit that fills in what Canal's first pass missed is stamped with the table's
    position and where it really reached; a restarted channel reads both, and a changelog the changes it
    holds in between."""
    channel = ChannelSettings("db.t", "lake.held_steps.refill", mode="changelog")
    sink = make_sink(spark, channel, JOB, spark_settings)
    commit(sink, "c1", position(100), (1, "a"))
    assert sink.state.read_state().refill is None
    staged(sink, ("2", "b")).apply(position(300), "c2", behind=position(200))
    restarted = make_sink(spark, channel, JOB, spark_settings)
    state = restarted.state.read_state()
    assert (state.position, state.refill) == (position(300), position(200))
    # (The rows staged above carry position 1; those of c1 its end, 100.)
    assert restarted.state.changes_held(position(50), position(300)) == {("mysql-bin.000007", 100)}
    assert restarted.state.changes_held(position(100), position(300)) == set()
    commit(restarted, "c3", position(400), (3, "c"))
    assert restarted.state.read_state().refill is None  # past the table's position: nothing left behind


def test_a_held_step_whose_table_check_fails_leaves_nothing_on_the_branch_for_the_replay(spark, spark_settings):
    """A step that fails before it writes (its rows name a column the target lacks) drops what the steps
    before it held: the replay starts the branch from main again, so a changelog holds each change once."""
    target = "lake.held_steps.check_fails"
    channel = ChannelSettings("db.t", target, mode="changelog")
    sink = make_sink(spark, channel, JOB, spark_settings)
    commit(sink, "c1", position(100), (1, "a"))
    staged(sink, ("2", "b")).apply(position(200), "c2~1", publish=False)
    sink.writer.begin()
    sink.writer.send(RowBatch("db.t", ("id", "nickname"), COLUMNS, (0,),
                         (ChangeRow(ChangeKind.INSERT, ("3", "c"), position(1)),)))
    with pytest.raises(Exception, match="no column 'nickname'"):
        sink.writer.seal().apply(position(300), "c2")
    staged(sink, ("2", "b")).apply(position(200), "c2~1", publish=False)  # the replay
    staged(sink, ("3", "c")).apply(position(300), "c2", publish=True)
    assert visible(spark, target) == [(1, "a"), (2, "b"), (3, "c")]
