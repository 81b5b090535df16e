"""A channel's committed position is read from the table's current lineage, not its newest snapshot.

After ``rollback_to_snapshot`` (or with a commit on another branch) the
newest snapshot of a job by commit time may hold data the table no longer
has; reading its position would make a restarted job skip that data.
"""

from __future__ import annotations

import math

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.commit_properties import with_commit_properties
from spark_sink.identifiers import quote_table, split_table
from spark_sink.sink import make_sink
from spark_sink.stamp import position_properties, read_stamp
from spark_sink.table import TargetColumn, TargetTable
from tests.helpers import eventually

JOB = "job-readback"
COLUMNS = (SourceColumn("id", "int(11)", 4, True), SourceColumn("name", "varchar(32)", 12, False))


def position(offset: int) -> EntryPosition:
    return EntryPosition("mysql-bin.000007", offset, 1_700_000_000_000 + offset, f"3e11fa47-71ca:{offset}")


def commit(sink, label: str, end: EntryPosition, *rows: tuple[int, str]) -> None:
    """One transaction through the sink, as a channel runs it."""
    changes = tuple(ChangeRow(ChangeKind.INSERT, (str(key), name), end) for key, name in rows)
    sink.writer.begin()
    sink.writer.send(RowBatch("db.t", ("id", "name"), COLUMNS, (0,), changes))
    sink.writer.commit(end, label)


def current_snapshot(spark, target: str) -> tuple[int, dict[str, str]] | None:
    """main's snapshot id and summary, read independently of the code under test."""
    table = quote_table(target)
    row = spark.sql(
        f"SELECT s.snapshot_id, s.summary FROM {table}.snapshots s JOIN {table}.refs r "
        f"ON r.snapshot_id = s.snapshot_id WHERE r.name = 'main'"
    ).first()
    return None if row is None else (row["snapshot_id"], row["summary"])


def snapshots_by_time(spark, target: str) -> list[int]:
    rows = spark.sql(f"SELECT snapshot_id FROM {quote_table(target)}.snapshots ORDER BY committed_at").collect()
    return [row["snapshot_id"] for row in rows]


def ancestors(spark, target: str, snapshot_id: int) -> list[int]:
    """The snapshots before ``snapshot_id`` in its lineage, newest first."""
    rows = spark.sql(f"SELECT snapshot_id, parent_id FROM {quote_table(target)}.snapshots").collect()
    parents = {row["snapshot_id"]: row["parent_id"] for row in rows}
    lineage = []
    while parents.get(snapshot_id) is not None:
        snapshot_id = parents[snapshot_id]
        lineage.append(snapshot_id)
    return lineage


def rollback(spark, target: str, snapshot_id: int) -> None:
    catalog, namespace, table = split_table(target)
    spark.sql(f"CALL {catalog}.system.rollback_to_snapshot('{namespace}.{table}', {snapshot_id})")


def test_empty_table_has_no_position(spark, spark_settings):
    target = "lake.readback_empty.t"
    table = TargetTable(spark, target)
    table.create([TargetColumn("id", "int", True), TargetColumn("name", "string")], ["id"])
    assert read_stamp(table, JOB) is None
    assert make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings).state.read_state().position is None


def test_rollback_reads_the_position_of_the_current_snapshot(spark, spark_settings):
    target = "lake.readback_rollback.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    first, second = position(100), position(200)
    commit(sink, "l1", first, (1, "a"), (2, "b"))
    first_id = current_snapshot(spark, target)[0]
    commit(sink, "l2", second, (2, "B"), (3, "c"))
    second_id = current_snapshot(spark, target)[0]
    assert sink.state.read_state().position == second

    rollback(spark, target, first_id)
    # The second snapshot is still there and the newest by commit time, but not in the current lineage.
    assert snapshots_by_time(spark, target)[-1] == second_id
    assert current_snapshot(spark, target)[0] == first_id
    assert sink.state.read_state().position == first, "read a position the table does not hold"
    # As a restarted job reads it: a new sink on the same table.
    restarted = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    assert restarted.state.read_state().position == first
    other_job = make_sink(spark, ChannelSettings("db.t", target), "another-job", spark_settings)
    assert other_job.state.read_state().position is None

    # The restarted job applies the rolled-back transaction again, on top of the first snapshot.
    commit(restarted, "l2-again", second, (2, "B"), (3, "c"))
    lineage = ancestors(spark, target, current_snapshot(spark, target)[0])
    assert first_id in lineage and second_id not in lineage
    assert restarted.state.read_state().position == second
    rows = spark.table(quote_table(target)).orderBy("id").collect()
    assert [tuple(row) for row in rows] == [(1, "a"), (2, "B"), (3, "c")]


def test_a_forgotten_position_is_not_read_until_the_next_commit(spark, spark_settings):
    # `canalbridge reset`: the table keeps its rows and snapshots, the job no longer reads where it stood.
    target = "lake.readback_reset.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, "l1", position(100), (1, "a"))
    commit(sink, "l2", position(200), (2, "b"))
    other_job = make_sink(spark, ChannelSettings("db.t", target), "another-job", spark_settings)
    commit(other_job, "o1", position(300), (3, "c"))

    sink.state.forget_position()
    assert sink.state.read_state().position is None
    assert make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings).state.read_state().position is None
    assert other_job.state.read_state().position == position(300), "another job's position is its own"
    # Replayed from an earlier position, the next commit is read back again.
    commit(sink, "l1-again", position(100), (1, "a"))
    assert sink.state.read_state().position == position(100)
    rows = spark.table(quote_table(target)).orderBy("id").collect()
    assert [tuple(row) for row in rows] == [(1, "a"), (2, "b"), (3, "c")]


def test_newer_commit_on_a_branch_counts_only_once_main_holds_it(spark, spark_settings):
    target = "lake.readback_branch.t"
    table = quote_table(target)
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, "l1", position(100), (1, "a"))
    # Other writers' snapshots on main (no canalbridge summary) are walked past.
    spark.sql(f"INSERT INTO {table} VALUES (9, 'by hand')")
    assert sink.state.read_state().position == position(100)

    spark.sql(f"ALTER TABLE {table} CREATE BRANCH audit")
    for offset, key in ((300, 3), (400, 4)):
        with_commit_properties(
            spark, position_properties(JOB, f"b{offset}", position(offset)),
            lambda key=key: spark.sql(f"INSERT INTO {table}.branch_audit VALUES ({key}, 'branch')"),
        )
    spark.sql(f"INSERT INTO {table} VALUES (10, 'by hand')")  # main moves on after the branch commits
    newest_of_job = spark.sql(
        f"SELECT summary['canalbridge.offset'] AS o FROM {table}.snapshots "
        f"WHERE summary['canalbridge.job'] = '{JOB}' ORDER BY committed_at DESC LIMIT 1"
    ).first()["o"]
    assert newest_of_job == "400"  # on the branch, not an ancestor of main
    assert sink.state.read_state().position == position(100)

    # Once main is the branch, its commits are main's ancestors, though main's history never listed them.
    spark.sql("CALL lake.system.set_current_snapshot(table => 'readback_branch.t', ref => 'audit')")
    history = {row["snapshot_id"] for row in spark.sql(f"SELECT snapshot_id FROM {table}.history").collect()}
    branch_ids = spark.sql(
        f"SELECT snapshot_id FROM {table}.snapshots WHERE summary['canalbridge.offset'] = '300'"
    ).collect()
    assert branch_ids[0]["snapshot_id"] not in history
    assert sink.state.read_state().position == position(400)


# -- end to end: a restarted job after a rollback ----------------------------------------------

COMMITS = CommitSettings(interval_seconds=1.0, min_events=5000, min_bytes=1, retries=100,
                         retry_initial_seconds=0.05, retry_max_seconds=0.5, max_source_txn_wait_seconds=10)


def last_row_position(entries) -> EntryPosition:
    rows = [e for e in entries if e.entryType == entry_pb.EntryType.ROWDATA]
    return EntryPosition.of(rows[-1])


def committed_through(spark, target: str, wanted: EntryPosition) -> bool:
    """Whether main's snapshot carries a position at or after ``wanted`` (the table may not exist yet)."""
    if TargetTable(spark, target).columns() is None:
        return False
    current = current_snapshot(spark, target)
    if current is None or "canalbridge.offset" not in current[1]:
        return False
    summary = current[1]
    return EntryPosition(summary["canalbridge.journal"], int(summary["canalbridge.offset"])) >= wanted


def test_restarted_job_applies_the_rolled_back_changes_again(spark, spark_settings, dev_server_factory):
    destination = "readback"
    # Canal's meta never flushes, and it crashes: after its restart it sends everything again.
    server = dev_server_factory(DestinationConfig(destination, meta_flush_period_s=math.inf))
    tables = standard_tables(2)[1:]  # orders
    workload = Workload(WorkloadSpec(tables=tables, row_changes=600, pk_change_ratio=0.2, seed=21))
    entries = list(workload)
    ends = [i for i, e in enumerate(entries) if e.entryType == entry_pb.EntryType.TRANSACTIONEND]
    split = ends[len(ends) // 2] + 1
    target = f"lake.readback_e2e.{tables[0].name}"
    canal = CanalSettings("127.0.0.1", server.port, destination, batch_size=512, poll_timeout_ms=100)
    settings = JobSettings(JOB, canal, (ChannelSettings(tables[0].qualified, target),), COMMITS)

    def new_job() -> SyncJob:
        return SyncJob(settings, lambda channel: make_sink(spark, channel, settings.name, spark_settings))

    # Run 1 commits two parts.
    server.feed(destination, entries[:split])
    job = new_job()
    job.start()
    assert eventually(lambda: committed_through(spark, target, last_row_position(entries[:split])), 180), \
        (job.state, job.fail_message)
    first_id, first_summary = current_snapshot(spark, target)
    first_position = EntryPosition(first_summary["canalbridge.journal"], int(first_summary["canalbridge.offset"]))
    server.feed(destination, entries[split:])
    assert eventually(lambda: committed_through(spark, target, last_row_position(entries)), 180), \
        (job.state, job.fail_message)
    job.pause()
    assert current_snapshot(spark, target)[0] != first_id

    # The user rolls the table back to the end of the first part; Canal restarts and replays.
    rollback(spark, target, first_id)
    assert read_stamp(TargetTable(spark, target), JOB).position.same_place(first_position)
    server.restart(crash=True)

    job = new_job()
    job.start()
    assert server.destinations[destination].wait_acked(180), (job.state, job.fail_message)
    job.pause()
    expected = workload.expected[tables[0].qualified]
    assert read_typed(spark, target, tables[0]) == expected_typed(tables[0], expected.rows.values()), \
        "the rolled-back changes were not applied again"


def test_a_table_marked_for_a_rebuild_is_made_anew_by_its_first_commit_keeping_the_old_in_its_history(
        spark, spark_settings):
    # `canalbridge rebuild`: the source's key changed to (id, v) behind the job's back.
    target = "lake.readback_rebuild.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, "l1", position(100), (1, "a"), (2, "b"))
    old = current_snapshot(spark, target)[0]

    assert sink.state.mark_rebuild()
    assert make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings).state.read_state().rebuild
    restarted = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    state = restarted.state.read_state()
    assert (state.rebuild, state.columns, state.position) == (True, None, None)
    keyed = (SourceColumn("id", "int(11)", 4, True), SourceColumn("v", "int(11)", 4, True),
             SourceColumn("name", "varchar(32)", 12, False))
    restarted.writer.begin()
    restarted.writer.send(RowBatch("db.t", ("id", "v", "name"), keyed, (0, 1), (
        ChangeRow(ChangeKind.INSERT, ("1", "1", "x"), position(300)),
        ChangeRow(ChangeKind.INSERT, ("1", "2", "y"), position(300)))))
    restarted.writer.commit(position(300), "l3")

    rows = spark.table(quote_table(target)).orderBy("id", "v").collect()
    assert [tuple(row) for row in rows] == [(1, 1, "x"), (1, 2, "y")], "the old rows went with the old table"
    properties = TargetTable(spark, target).properties()
    assert properties["canalbridge.primary-key"] == '["id", "v"]'
    assert not any(key.startswith("canalbridge.rebuild.") for key in properties)
    assert old in snapshots_by_time(spark, target) and old not in ancestors(
        spark, target, current_snapshot(spark, target)[0])
    again = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings).state.read_state()
    assert (again.rebuild, again.position) == (False, position(300))


def test_a_rebuild_of_a_target_its_writer_already_wrote_makes_it_anew_all_the_same(spark, spark_settings):
    # The daemon keeps a job's writers across runs: one that wrote the table is ready for the same columns.
    target = "lake.readback_rebuild_again.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, "l1", position(100), (1, "a"))
    assert sink.state.mark_rebuild()
    assert sink.state.read_state().rebuild  # (the channel's read at its start)
    rekeyed = (SourceColumn("id", "int(11)", 4, True), SourceColumn("name", "varchar(32)", 12, True))
    sink.writer.begin()
    sink.writer.send(RowBatch("db.t", ("id", "name"), rekeyed, (0, 1), (
        ChangeRow(ChangeKind.INSERT, ("1", "x"), position(300)),)))
    sink.writer.commit(position(300), "l3")
    assert [tuple(row) for row in spark.table(quote_table(target)).collect()] == [(1, "x")]
    assert TargetTable(spark, target).properties()["canalbridge.primary-key"] == '["id", "name"]'
