"""No table's snapshot stops a job: with MariaDB, the real Canal server, Spark and Iceberg, a table renamed
mid-snapshot under a job that follows renames is read on under its new name, and a back-fill whose condition a
later DDL breaks is parked, its stream going on, until its snapshot is cancelled for good."""

from __future__ import annotations

import pytest

from canalbridge.daemon.state import StateStore, StoredFilters
from canalbridge.source_db import SourceDb
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SchemaSettings, SnapshotSettings
from canalbridge.sync.snapshot.runner import SnapshotRunner
from canalbridge.sync.snapshot.source import SnapshotSource
from spark_sink.chunk_read import JdbcSource, SparkChunkReader
from spark_sink.sink import make_sink
from tests.helpers import eventually
from tests.infra.canal_server import CanalDestination

pytestmark = [pytest.mark.real, pytest.mark.spark]

DB = "snapedges"
SIGNALS = "canalbridge_signal"
USER, PASSWORD = "snapedges_user", "snapedges-secret"
ROWS = 160  # per table, written before Canal's start position: only the snapshot brings them


@pytest.mark.timeout(900)
def test_a_renamed_table_is_read_on_under_its_new_name_and_a_broken_back_fill_is_parked_until_cancelled(
        canal, mariadb, spark, spark_settings, tmp_path):
    mariadb.create_database(DB)
    mariadb.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)",
                    "CREATE TABLE flags (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, flag INT NOT NULL)",
                    "INSERT INTO items VALUES " + ", ".join(f"({i}, 'item {i}')" for i in range(1, ROWS + 1)),
                    "INSERT INTO flags VALUES " + ", ".join(f"({i}, 'flag {i}', 1)" for i in range(1, ROWS + 1)),
                    SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
    mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS)
    canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}\..*"))
    snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=USER, password=PASSWORD,
                                signal_table=f"{DB}.{SIGNALS}", parallelism=1, chunk_rows=20)
    settings = JobSettings(DB, canal.canal_settings(DB, poll_timeout_ms=50),
                           (ChannelSettings(f"{DB}.items", f"lake.{DB}.items"),
                            ChannelSettings(f"{DB}.flags", f"lake.{DB}.flags")),
                           CommitSettings(interval_seconds=0.5, min_events=1, min_bytes=1), snapshot=snapshot,
                           schema=SchemaSettings(rename_table="follow"))
    source = SnapshotSource(lambda: SourceDb(mariadb.host, mariadb.port, USER, PASSWORD),
                            SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD)),
                            filters=StoredFilters(StateStore(tmp_path)))  # (the daemon's back-fill conditions)

    def new_job() -> SyncJob:
        return SyncJob(settings, lambda channel: make_sink(spark, channel, DB, spark_settings), snapshot=source)

    def target(table: str) -> dict[int, str]:
        return {row.id: row.name for row in spark.table(f"lake.{DB}.{table}").collect()}

    def source_rows(table: str) -> dict[int, str]:
        return dict(mariadb.execute(f"SELECT id, name FROM {table}", database=DB))

    def ended(runner: SnapshotRunner) -> None:
        assert eventually(lambda: not runner.alive or job.state is not JobState.RUNNING, 300)
        assert job.state is JobState.RUNNING, job.fail_message

    job = new_job()
    job.start()
    try:
        runner = job.snapshot
        assert runner is not None
        assert eventually(lambda: runner.status()[f"{DB}.items"].rows_done >= 40 or not runner.alive, 300)
        assert runner.status()[f"{DB}.items"].phase == "reading", "the snapshot of items ended before the rename"
        mariadb.execute("RENAME TABLE items TO items_v2", "UPDATE items_v2 SET name = 'renamed' WHERE id = 150",
                        database=DB)
        ended(runner)
        assert runner.finished.is_set() and runner.status()[f"{DB}.items"].phase == "finished"
        assert eventually(lambda: target("items").get(150) == "renamed", 60)
        assert target("items") == source_rows("items_v2")
        assert target("flags") == source_rows("flags")

        # A back-fill of the flagged rows, whose column a DDL drops while the back-fill reads: parked, not paused.
        job.on_demand.snapshot([f"{DB}.flags"], "flag = 1")
        backfill = job.snapshot
        assert backfill is not None and backfill is not runner
        assert eventually(lambda: backfill.status()[f"{DB}.flags"].rows_done >= 40 or not backfill.alive, 300)
        assert backfill.alive, "the back-fill ended before the DDL"
        mariadb.execute("ALTER TABLE flags DROP COLUMN flag", "UPDATE flags SET name = 'streamed' WHERE id = 3",
                        database=DB)
        ended(backfill)
        status = backfill.status()[f"{DB}.flags"]
        assert status.phase == "parked" and "Unknown column 'flag'" in (status.error or ""), status
        assert f"canalbridge snapshot --cancel {DB}" in (status.error or "")
        assert eventually(lambda: target("flags").get(3) == "streamed", 60), "its stream goes on"
        mariadb.execute("UPDATE items_v2 SET name = 'still streamed' WHERE id = 1", database=DB)
        assert eventually(lambda: target("items").get(1) == "still streamed", 60)

        assert job.on_demand.cancel("snapshot") == (f"{DB}.flags",)
        cancelled = job.snapshot
        assert cancelled is not None
        ended(cancelled)
        assert cancelled.status()[f"{DB}.flags"].phase == "cancelled"

        # A back-fill of the renamed table: its condition is checked, and its rows read, under its new name.
        mariadb.execute("SET sql_log_bin = 0", "UPDATE items_v2 SET name = 'behind' WHERE id = 7", database=DB)
        job.on_demand.snapshot([f"{DB}.items"], "id <= 10")
        backfill = job.snapshot
        assert backfill is not None
        ended(backfill)
        assert backfill.status()[f"{DB}.items"].phase == "finished"
        assert target("items")[7] == "behind"
    finally:
        job.shutdown()
    again = new_job()  # the cancel's mark says the back-fill is done, and items was read whole under its new name
    again.start()
    try:
        assert again.snapshot is None and again.state is JobState.RUNNING
    finally:
        again.shutdown()
    assert target("flags") == source_rows("flags")
    assert target("items") == source_rows("items_v2")
