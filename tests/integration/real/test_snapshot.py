"""A snapshot brings the rows a table held before the stream began, and meets the stream exactly: with MariaDB,
the real Canal server, Spark over JDBC and Iceberg targets, while a workload inserts, updates, deletes and
changes keys in the very tables being read, every target ends equal to ``SELECT *`` of its source."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from canalbridge.source_db import SourceDb
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.job import JobState, SyncJob
from canalbridge.sync.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.runner import SnapshotSource
from spark_sink.chunk_read import JdbcSource, SparkChunkReader
from spark_sink.sink import make_sink
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
ROWS_BEFORE = 180  # per table, written before Canal's start position: only the snapshot brings them


@pytest.mark.timeout(900)
def test_a_snapshot_during_a_workload_leaves_every_target_equal_to_its_source(
        canal, mariadb, spark, spark_settings):
    mariadb.create_database(DB)
    mariadb.execute(*mixed_setup(TABLES), SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
    mariadb.execute(f"DROP USER IF EXISTS '{USER}'@'%'", f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'",
                    f"GRANT SELECT ON {DB}.* TO '{USER}'@'%'",
                    f"GRANT INSERT, DELETE ON {DB}.{SIGNALS} TO '{USER}'@'%'")
    source = Source(mariadb, DB, TABLES, seed=35)
    for table in TABLES:
        for _ in range(ROWS_BEFORE // 30):
            source.insert(table, [source.row(table) for _ in range(30)])
    source.commit()
    canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}\..*"))  # its stream starts here

    snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=USER, password=PASSWORD,
                                signal_table=f"{DB}.{SIGNALS}", chunk_rows=25, parallelism=2,
                                land_timeout_seconds=300)
    settings = JobSettings(DB, canal.canal_settings(DB, poll_timeout_ms=50),
                           tuple(ChannelSettings(t.qualified, f"lake.{DB}.{t.name}") for t in TABLES),
                           CommitSettings(interval_seconds=0.5, min_events=1, min_bytes=1), snapshot=snapshot)
    source_db = SnapshotSource(lambda: SourceDb(mariadb.host, mariadb.port, USER, PASSWORD),
                               SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD)))

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
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert job.acks.wait_through(last, 240), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING, job.fail_message
    finally:
        job.shutdown()

    assert job.stats.chunks_routed >= len(TABLES) * ROWS_BEFORE // 50
    for table in TABLES:
        assert_target_equals_source(spark, source, table, f"lake.{DB}.{table.name}")
    assert mariadb.execute(f"SELECT COUNT(*) FROM {SIGNALS}", database=DB) == [(0,)], "signal rows are removed"
    # Each target's last stamp says its table's snapshot finished: a restart does not take them again.
    again = new_job()
    again.start()
    try:
        assert again.snapshot is None
    finally:
        again.shutdown()


def validate(tmp_path, mariadb, user: str, password: str, table: str = "keyed") -> subprocess.CompletedProcess:
    """``canalbridge validate`` of a job on table ``table`` of database ``checks`` with a snapshot as ``user``."""
    text = VALID.replace('source = "db.t"', f'source = "checks.{table}"').replace(
        "[[job.channel]]", f'[job.snapshot]\nhost = "{mariadb.host}"\nport = {mariadb.port}\nuser = "{user}"\n'
                           f'password_env = "SNAPSHOT_PASSWORD"\nsignal_table = "checks.{SIGNALS}"\n[[job.channel]]')
    return subprocess.run([sys.executable, "-m", "canalbridge", "validate", "-c", str(write(tmp_path, text))],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "SNAPSHOT_PASSWORD": password})


def test_validate_checks_the_snapshots_source_and_names_what_to_fix(mariadb, tmp_path):
    mariadb.create_database("checks")
    mariadb.execute("CREATE TABLE keyed (id INT PRIMARY KEY, v INT)", "CREATE TABLE unkeyed (v INT)",
                    SIGNAL_TABLE_DDL.format(table=SIGNALS), database="checks")
    mariadb.execute("DROP USER IF EXISTS 'reader'@'%'", "CREATE USER 'reader'@'%' IDENTIFIED BY 'reader-secret'",
                    "GRANT SELECT ON checks.* TO 'reader'@'%'",
                    "DROP USER IF EXISTS 'writer'@'%'", "CREATE USER 'writer'@'%' IDENTIFIED BY 'writer-secret'",
                    "GRANT SELECT ON checks.* TO 'writer'@'%'",
                    f"GRANT INSERT, DELETE ON checks.{SIGNALS} TO 'writer'@'%'")
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
    assert mariadb.execute(f"SELECT COUNT(*) FROM {SIGNALS}", database="checks") == [(0,)], "the check left no row"

