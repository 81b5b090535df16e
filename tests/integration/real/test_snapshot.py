"""A snapshot brings the rows a table held before the stream began, and meets the stream exactly: with MariaDB,
the real Canal server, Spark over JDBC and Iceberg targets, while a workload inserts, updates, deletes and
changes keys in the very tables being read, every target ends equal to ``SELECT *`` of its source (a
changelog target played in order, each change in it once), its source read over verified TLS."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace

import pytest

from canalbridge.devkit.entries import TableDef
from canalbridge.source_db import OPEN, FilterError, Signal, SignalTable, SourceDb, SourceDbError
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.errors import JobStateError
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.runner import SnapshotRunner
from canalbridge.sync.snapshot.source import SnapshotSource
from canalbridge.sync.snapshot.verify import TableCheck
from spark_sink.chunk_read import JdbcSource, SparkChunkReader
from spark_sink.identifiers import quote, quote_table
from spark_sink.sink import make_sink
from spark_sink.verify import SparkComparer
from tests.configs import VALID, write
from tests.helpers import eventually
from tests.infra.canal_server import CanalDestination
from tests.infra.sql_source import Source, mixed_setup, mixed_tables, mixed_workload
from tests.integration.real.daemon_run import assert_target_equals_source

pytestmark = [pytest.mark.real, pytest.mark.spark]

DB = "snapshot"
SIGNALS = "canalbridge_signal"
USER, PASSWORD = "snapshotter", "snapshotter-secret"
TABLES = mixed_tables(DB)  # every column type; an integer, a composite and a reserved-word table
CHANGELOG = "accounts"  # (composite key) into a changelog target; the others into upsert targets
ROWS_BEFORE = 180  # per table, written before Canal's start position: only the snapshot brings them


@pytest.mark.timeout(900)
def test_a_snapshot_during_a_workload_leaves_every_target_equal_to_its_source(
        canal, mariadb, spark, spark_settings):
    mariadb.create_database(DB)
    mariadb.execute(*mixed_setup(TABLES), SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
    # A user that must connect over TLS: every read and every signal of the snapshot goes through it.
    mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS, require_tls=True)
    source = Source(mariadb, DB, TABLES, seed=35)
    for table in TABLES:
        for _ in range(ROWS_BEFORE // 30):
            source.insert(table, [source.row(table) for _ in range(30)])
    source.commit()
    canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}\..*"))  # its stream starts here

    snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=USER, password=PASSWORD,
                                signal_table=f"{DB}.{SIGNALS}", chunk_rows=25, parallelism=2,
                                land_timeout_seconds=300, tls="verify-full", tls_ca=str(mariadb.tls.ca))
    settings = JobSettings(DB, canal.canal_settings(DB, poll_timeout_ms=50),
                           tuple(ChannelSettings(t.qualified, f"lake.{DB}.{t.name}",
                                                 mode="changelog" if t.name == CHANGELOG else "upsert")
                                 for t in TABLES),
                           CommitSettings(interval_seconds=0.5, min_events=1, min_bytes=1), snapshot=snapshot)
    tls = snapshot.source_tls
    source_db = SnapshotSource(lambda: SourceDb(mariadb.host, mariadb.port, USER, PASSWORD, tls=tls),
                               SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD,
                                                                          tls)),
                               SparkComparer(lambda: spark))

    def new_job() -> SyncJob:
        return SyncJob(settings, lambda channel: make_sink(spark, channel, DB, spark_settings), snapshot=source_db)

    job = new_job()
    job.start()
    try:
        runner = job.snapshot
        assert runner is not None and {t.name for t in runner.tables} == {t.qualified for t in TABLES}
        # The workload runs while the chunks are read: its changes land in and around the windows; so does a
        # DDL, which a chunk read after it must fit (and which spoils a window open on its table).
        def halfway(rounds: int) -> None:
            if rounds == 6:
                mariadb.execute("ALTER TABLE orders ADD COLUMN extra INT NULL", database=DB)

        mixed_workload(source, TABLES, rounds=12, progress=halfway)
        assert eventually(lambda: runner.finished.is_set() or job.state is not JobState.RUNNING, 600)
        assert runner.finished.is_set(), f"the snapshot did not end: {job.state} {job.fail_message}"
        for name, status in runner.status().items():  # (one run: every row it landed is every row done)
            assert status.phase == "finished" and 0 < status.rows_done == status.rows, (name, status)
            assert status.rows_estimate is not None, (name, status)
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert job.acks.wait_through(last, 240), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING, job.fail_message
        # verify finds every upsert target equal, every column type compared as a commit writes it.
        assert set(job.on_demand.verify()[1]) == {t.qualified for t in TABLES if t.name != CHANGELOG}
        verify = job.verify
        assert verify is not None and verify.ended.wait(300)
        assert all(check.phase == "equal" and check.rows for check in verify.checks().values()), verify.checks()
    finally:
        job.shutdown()

    assert job.stats.chunks_routed >= len(TABLES) * ROWS_BEFORE // 50
    for table in TABLES:
        target = f"lake.{DB}.{table.name}"
        if table.name == CHANGELOG:
            assert_changelog_once(spark, table, target)
            target = folded(spark, table, target)
        assert_target_equals_source(spark, source, table, target)
    assert mariadb.execute(f"SELECT COUNT(*) FROM {SIGNALS}", database=DB) == [(0,)], "signal rows are removed"
    # Each target's last stamp says its table's snapshot finished: a restart does not take them again.
    again = new_job()
    again.start()
    try:
        assert again.snapshot is None
    finally:
        again.shutdown()


def items_jobs(canal, mariadb, spark, spark_settings, db: str, rows: int, **snapshot_settings: object
               ) -> Callable[..., SyncJob]:
    """Database ``db`` with a table ``items`` of ``rows`` rows written before its Canal destination's start (only
    a snapshot brings them), a snapshot user of its own; returns a maker of jobs on it (keywords: snapshot
    settings to change)."""
    mariadb.create_database(db)
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)",
                    "INSERT INTO items VALUES " + ", ".join(f"({i}, 'item {i}')" for i in range(1, rows + 1)),
                    SIGNAL_TABLE_DDL.format(table=SIGNALS), database=db)
    user = f"{db}_user"
    mariadb.snapshot_user(user, PASSWORD, db, SIGNALS)
    canal.add_destination(CanalDestination(db, filter_regex=rf"{db}\..*"))
    snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=user, password=PASSWORD,
                                signal_table=f"{db}.{SIGNALS}", parallelism=1, **snapshot_settings)
    settings = JobSettings(db, canal.canal_settings(db, poll_timeout_ms=50),
                           (ChannelSettings(f"{db}.items", f"lake.{db}.items"),),
                           CommitSettings(interval_seconds=0.5, min_events=1, min_bytes=1), snapshot=snapshot)
    source_db = SnapshotSource(lambda: SourceDb(mariadb.host, mariadb.port, user, PASSWORD),
                               SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, user, PASSWORD)),
                               SparkComparer(lambda: spark))

    def new_job(**changes: object) -> SyncJob:
        return SyncJob(replace(settings, snapshot=replace(snapshot, **changes)),
                       lambda channel: make_sink(spark, channel, db, spark_settings), snapshot=source_db)

    return new_job


@pytest.mark.timeout(600)
def test_a_snapshot_only_job_brings_its_tables_then_ends_finished(canal, mariadb, spark, spark_settings):
    new_job = items_jobs(canal, mariadb, spark, spark_settings, "snaponly", 60, chunk_rows=30, mode="only")
    job = new_job()
    job.start()
    try:
        assert job.wait_state(JobState.FINISHED, 300), (job.state, job.fail_message)
        assert job.channels == [], "a finished job's threads are stopped"
    finally:
        job.shutdown()
    rows = sorted((row.id, row.name) for row in spark.table("lake.snaponly.items").collect())
    assert rows == [(i, f"item {i}") for i in range(1, 61)]
    again = new_job()  # nothing left to read: it ends as it starts
    again.start()
    try:
        assert again.state is JobState.FINISHED and again.snapshot is None
    finally:
        again.shutdown()
    streams_on = new_job(mode="initial")  # the config no longer says "only": the finished job streams on
    streams_on.restore(again.record())
    streams_on.start()
    try:
        assert streams_on.state is JobState.RUNNING and streams_on.snapshot is None
    finally:
        streams_on.shutdown()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("server", ["mariadb", "canal"])
def test_a_server_restart_during_a_snapshot_is_ridden_out_and_the_target_ends_equal(canal, mariadb, spark,
                                                                                     spark_settings, server):
    # MariaDB: the runner's connection and the read in flight break; the chunk closed before lands, the one
    # being read is read again once MariaDB answers. Canal: the stream breaks, and what it sent that was not
    # acked comes again, signals and the changes in their windows with it. The job never pauses.
    db = f"snaprestart_{server}"
    new_job = items_jobs(canal, mariadb, spark, spark_settings, db, 120, chunk_rows=20)
    job = new_job()
    job.start()
    try:
        runner = job.snapshot
        assert runner is not None
        assert eventually(lambda: runner.status()[f"{db}.items"].rows_done >= 40 or not runner.alive, 300)
        assert runner.alive, "the snapshot ended before the restart"
        if server == "mariadb":
            mariadb.restart()
        else:
            # Changes inside the chunks still to come, then Canal gone before the job could ack them all. (Not
            # before a MariaDB restart: Canal's parser can lose a rows event there, docs/guide/limits.md.)
            mariadb.execute("UPDATE items SET name = CONCAT(name, ' changed') WHERE id % 7 = 0",
                            "DELETE FROM items WHERE id % 11 = 0", database=db)
            canal.restart()
        assert eventually(lambda: not runner.alive or job.state is not JobState.RUNNING, 300)
        assert job.state is JobState.RUNNING and runner.finished.is_set(), job.fail_message
        if server == "canal":  # (the stream did break: what was not acked came again after a reconnect)
            assert job.receiver_stats.connections_lost >= 1
        mariadb.execute("UPDATE items SET name = 'streamed on' WHERE id = 8", database=db)
        assert eventually(lambda: spark.table(f"lake.{db}.items").where("id = 8").first().name == "streamed on",
                          120)
    finally:
        job.shutdown()
    rows = spark.table(f"lake.{db}.items").collect()
    assert len(rows) == len({row.id for row in rows}), "a row landed twice"
    assert {row.id: row.name for row in rows} == dict(mariadb.execute("SELECT id, name FROM items", database=db))


@pytest.mark.timeout(600)
def test_a_resync_and_a_back_fill_repair_rows_changed_behind_the_jobs_back(canal, mariadb, spark, spark_settings):
    db = "resync"
    new_job = items_jobs(canal, mariadb, spark, spark_settings, db, 50, chunk_rows=20)

    def target() -> dict[int, str]:
        return {row.id: row.name for row in spark.table(f"lake.{db}.items").collect()}

    def source() -> dict[int, str]:
        return dict(mariadb.execute("SELECT id, name FROM items", database=db))

    def ended(job: SyncJob) -> SnapshotRunner:
        runner = job.snapshot
        assert runner is not None
        assert eventually(lambda: not runner.alive or job.state is not JobState.RUNNING, 300)
        assert job.state is JobState.RUNNING, job.fail_message
        return runner

    job = new_job()
    job.start()
    try:
        assert ended(job).finished.is_set()
        # Behind the job's back: changes that never reach the binlog, so never the stream.
        mariadb.execute("SET sql_log_bin = 0", "UPDATE items SET name = 'changed' WHERE id IN (5, 40)",
                        "INSERT INTO items VALUES (100, 'unseen')", "DELETE FROM items WHERE id IN (8, 30)",
                        database=db)
        mariadb.execute("UPDATE items SET name = 'streamed' WHERE id = 6", database=db)
        with pytest.raises(FilterError, match="closes more than was opened"):
            job.on_demand.snapshot([f"{db}.items"], "1 = 1) OR (1 = 1")
        with pytest.raises(SourceDbError, match=f"table {db}.items: .*SQL syntax"):
            job.on_demand.snapshot([f"{db}.items"], "id <=")
        with pytest.raises(KeyError, match=f"no channel named for 'resync.nosuch' \\(its tables: {db}.items\\)"):
            job.on_demand.snapshot([f"{db}.nosuch"])

        assert job.on_demand.snapshot([f"{db}.ITEMS"], "id <= 10") == {f"{db}.items": f"{db}.items"}  # a back-fill
        with pytest.raises(JobStateError, match=f"the snapshot of {db}.items is running"):
            job.on_demand.snapshot()
        assert ended(job).finished.is_set()
        assert eventually(lambda: target()[6] == "streamed", 60)
        held = target()
        assert held[5] == "changed" and held[40] == "item 40" and 100 not in held  # only the rows id <= 10
        assert 8 in held and 30 in held  # (a back-fill cannot tell a row the source lacks from one it skips)

        assert list(job.on_demand.snapshot()) == [f"{db}.items"]  # a re-sync: every table of the job
        assert ended(job).finished.is_set()
        assert target() == source()  # 8 and 30, which the source lacks, are gone too

        job.on_demand.snapshot()
        assert job.on_demand.cancel("snapshot") == (f"{db}.items",)
        cancelled = ended(job)
        assert not cancelled.finished.is_set() and cancelled.status()[f"{db}.items"].phase == "cancelled"
    finally:
        job.shutdown()
    again = new_job()  # the cancelled snapshot's mark says the table is done: no restart takes it up
    again.start()
    try:
        assert again.snapshot is None and again.state is JobState.RUNNING
    finally:
        again.shutdown()
    assert target() == source()


@pytest.mark.timeout(600)
def test_verify_finds_rows_changed_behind_the_jobs_back_and_not_those_the_stream_changes_meanwhile(
        canal, mariadb, spark, spark_settings):
    db = "verify"
    behind = (25, 45)  # changed behind the job's back below; the stream changes the others meanwhile
    streamed = [key for key in range(1, 61) if key not in behind]
    new_job = items_jobs(canal, mariadb, spark, spark_settings, db, 60, chunk_rows=30)
    job = new_job()
    job.start()
    try:
        runner = job.snapshot
        assert runner is not None and eventually(lambda: not runner.alive, 300) and runner.finished.is_set()

        def verified() -> dict[str, TableCheck]:
            """Verify every table while the stream changes rows of every chunk; each table's check."""
            assert job.on_demand.verify()[1] == (f"{db}.items",)
            with pytest.raises(JobStateError, match=f"the verify of {db}.items is running"):
                job.on_demand.snapshot()
            verify = job.verify
            assert verify is not None
            rounds = 0
            while not verify.ended.wait(0.05):  # (paced by the verify itself: changes land in its windows)
                rounds += 1
                mariadb.execute(f"UPDATE items SET name = 'streamed {rounds}' WHERE id = "
                                f"{streamed[rounds % len(streamed)]}", database=db)
            assert rounds > 0 and job.state is JobState.RUNNING, job.fail_message
            return verify.checks()

        # Behind the job's back: changes that never reach the binlog, so never the stream. (An equal verify: the
        # end-to-end test above, every column type.)
        mariadb.execute("SET sql_log_bin = 0", f"UPDATE items SET name = 'changed' WHERE id = {behind[0]}",
                        f"DELETE FROM items WHERE id = {behind[1]}", database=db)
        differs = verified()[f"{db}.items"]
        assert (differs.phase, differs.chunks, differs.rows) == ("differs", 3, 59), differs  # (+ keys above 60)
        assert [(d.after, d.through, d.keys, d.sample) for d in differs.differences] == [
            (None, "30", 1, ("25",)), ("30", "60", 1, ("45",))]  # (a row the source lacks is found too)
        # A back-fill of the first chunk repairs it; a back-fill cannot remove the row the source lacks.
        job.on_demand.snapshot([f"{db}.items"], differs.differences[0].where)
        repair = job.snapshot
        assert repair is not None and eventually(lambda: not repair.alive, 300) and repair.finished.is_set()
        assert [(d.after, d.keys) for d in verified()[f"{db}.items"].differences] == [("30", 1)]
        # A cancel, given before the verify could write its first signal (the signal table is locked meanwhile).
        with mariadb.connection(db) as locking, locking.cursor() as cursor:
            cursor.execute(f"LOCK TABLES {SIGNALS} WRITE")
            job.on_demand.verify()
            assert job.on_demand.cancel("verify") == (f"{db}.items",)
            cursor.execute("UNLOCK TABLES")
        cancelled = job.verify
        assert cancelled is not None and cancelled.ended.wait(120)
        assert cancelled.checks()[f"{db}.items"].phase == "cancelled" and job.state is JobState.RUNNING
        with pytest.raises(JobStateError, match="runs no verify"):
            job.on_demand.cancel("verify")
    finally:
        job.shutdown()


def folded(spark, table: TableDef, target: str) -> str:
    """A view of the changelog ``target`` played in order: each key's last row, unless that row removes it (``-D``,
    or ``-U`` when the key changed). Its snapshot rows (``+S``) count as rows."""
    keys = ", ".join(quote(name) for name in table.key_names)
    view = f"folded_{table.name}"
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM (
        SELECT *, row_number() OVER (PARTITION BY {keys} ORDER BY _journal DESC, _offset DESC, _seq DESC) AS _nth
        FROM {quote_table(target)}) WHERE _nth = 1 AND _op IN ('+I', '+U', '+S')""")
    return view


def assert_changelog_once(spark, table: TableDef, target: str) -> None:
    """Each change in the changelog ``target`` once (one row per entry, operation and key), and snapshot rows."""
    keys = ", ".join(quote(name) for name in table.key_names)
    twice = spark.sql(f"SELECT _journal, _offset, _op, {keys} FROM {quote_table(target)} "
                      f"GROUP BY _journal, _offset, _op, {keys} HAVING COUNT(*) > 1").collect()
    assert not twice, f"{target} holds changes twice: {twice[:5]}"
    ops = {row["_op"] for row in spark.table(quote_table(target)).select("_op").distinct().collect()}
    assert {"+S", "+I", "+U", "-U", "-D"} <= ops, ops


def validate(tmp_path, mariadb, user: str, password: str, table: str = "keyed",
             tls: str = "") -> subprocess.CompletedProcess:
    """``canalbridge validate`` of a job on table ``table`` of database ``checks`` with a snapshot as ``user``
    (``tls``: the section's TLS lines)."""
    text = VALID.replace('source = "db.t"', f'source = "checks.{table}"').replace(
        "[[job.channel]]", f'[job.snapshot]\nhost = "{mariadb.host}"\nport = {mariadb.port}\nuser = "{user}"\n'
                           f'password_env = "SNAPSHOT_PASSWORD"\nsignal_table = "checks.{SIGNALS}"\n{tls}'
                           f'[[job.channel]]')
    return subprocess.run([sys.executable, "-m", "canalbridge", "validate", "-c", str(write(tmp_path, text))],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "SNAPSHOT_PASSWORD": password})


def test_validate_checks_the_snapshots_source_and_names_what_to_fix(mariadb, tmp_path):
    mariadb.create_database("checks")
    mariadb.execute("CREATE TABLE keyed (id INT PRIMARY KEY, v INT)", "CREATE TABLE unkeyed (v INT)",
                    SIGNAL_TABLE_DDL.format(table=SIGNALS), database="checks")
    mariadb.execute("DROP USER IF EXISTS 'reader'@'%'", "CREATE USER 'reader'@'%' IDENTIFIED BY 'reader-secret'",
                    "GRANT SELECT ON checks.* TO 'reader'@'%'")  # (no grant on the signal table)
    mariadb.snapshot_user("writer", "writer-secret", "checks", SIGNALS)
    ready = validate(tmp_path, mariadb, "writer", "writer-secret")
    assert ready.returncode == 0 and "valid" in ready.stdout, ready.stderr
    wrong = validate(tmp_path, mariadb, "writer", "not-the-password")
    assert wrong.returncode == 2 and f"source database {mariadb.host}:{mariadb.port}" in wrong.stderr, wrong.stderr
    assert "not-the-password" not in wrong.stderr + wrong.stdout
    read_only = validate(tmp_path, mariadb, "reader", "reader-secret")
    assert read_only.returncode == 2 and "grant the snapshot's user SELECT, INSERT and DELETE" in read_only.stderr, (
        read_only.stderr)
    unkeyed = validate(tmp_path, mariadb, "writer", "writer-secret", table="unkeyed")
    assert unkeyed.returncode == 2 and "checks.unkeyed" in unkeyed.stderr and "`key`" in unkeyed.stderr, (
        unkeyed.stderr)
    mariadb.snapshot_user("sealed", "sealed-secret", "checks", SIGNALS, require_tls=True)
    verified = f'tls = "verify-full"\ntls_ca = "{mariadb.tls.ca}"\n'
    over_tls = validate(tmp_path, mariadb, "sealed", "sealed-secret", tls=verified)
    assert over_tls.returncode == 0 and "valid" in over_tls.stdout, over_tls.stderr
    plain = validate(tmp_path, mariadb, "sealed", "sealed-secret")
    assert plain.returncode == 2 and "and `tls` if the user must connect over TLS" in plain.stderr, plain.stderr
    assert mariadb.execute(f"SELECT COUNT(*) FROM {SIGNALS}", database="checks") == [(0,)], "the check left no row"
    mariadb.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")  # (what the window's key noting cannot work with)
    try:
        minimal = validate(tmp_path, mariadb, "writer", "writer-secret")
    finally:
        mariadb.execute("SET GLOBAL binlog_row_image = 'FULL'")
    assert minimal.returncode == 2 and "binlog_row_image is MINIMAL: a snapshot needs FULL" in minimal.stderr, (
        minimal.stderr)


def test_the_snapshots_sessions_are_its_own_whatever_the_servers_defaults(mariadb):
    # PAD_CHAR_TO_FULL_LENGTH would read CHAR keys padded; sql_safe_updates refuses a DELETE with no key in it.
    mariadb.create_database("modes")
    mariadb.execute("CREATE TABLE c (k CHAR(8) PRIMARY KEY)", "INSERT INTO c VALUES ('ab')",
                    SIGNAL_TABLE_DDL.format(table=SIGNALS), database="modes")
    mariadb.snapshot_user("moded", PASSWORD, "modes", SIGNALS)
    (before,) = mariadb.execute("SELECT @@GLOBAL.sql_mode, @@GLOBAL.sql_safe_updates")
    mariadb.execute("SET GLOBAL sql_mode = 'PAD_CHAR_TO_FULL_LENGTH,ANSI_QUOTES'", "SET GLOBAL sql_safe_updates = 1")
    try:
        with SourceDb(mariadb.host, mariadb.port, "moded", PASSWORD) as db:
            assert db.query("SELECT k FROM modes.c") == [("ab",)]
            signals = SignalTable(db, "modes", SIGNALS)
            signals.write(Signal("w1", OPEN, {}))
            signals.clear()
            assert db.query(f"SELECT COUNT(*) FROM modes.{SIGNALS}") == [(0,)]
    finally:
        mariadb.execute(f"SET GLOBAL sql_mode = '{before[0]}'", f"SET GLOBAL sql_safe_updates = {before[1]}")

