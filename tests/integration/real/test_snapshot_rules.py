"""A snapshot brings the tables a rule takes (``source`` with wildcards), found in MariaDB when the job starts,
each into the target the rule makes for it, and the shards a rule merges into one target (keyed by their schema
too), while a workload writes into them; a table no rule takes is left alone, and a restart, or a snapshot-only
job, finds every table done. Named, a pattern's tables are verified and re-synced as a channel's are."""

from __future__ import annotations

from dataclasses import replace

import pytest

from canalbridge.source_db import SourceDb
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.errors import JobStateError
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.source import SnapshotSource
from spark_sink.chunk_read import JdbcSource, SparkChunkReader
from spark_sink.sink import make_sink
from spark_sink.snapshot_progress import SparkProgressReader
from spark_sink.table import TargetTable
from spark_sink.verify import SparkComparer
from tests.helpers import eventually
from tests.infra.canal_server import CanalDestination

pytestmark = [pytest.mark.real, pytest.mark.spark]

DB = "snaprules"
SIGNALS = "canalbridge_signal"
USER, PASSWORD = "snaprules_user", "snaprules-secret"
ROWS = {"t_a": 40, "t_b": 30, "other": 5}  # before Canal's start position: only a snapshot brings them
SHARDS = {f"{DB}_s1": 30, f"{DB}_s2": 25}  # each with an `orders` table, keys 1..n in both


def merged_rows(spark) -> dict[tuple[str, int], str]:
    found = spark.table(f"lake.{DB}.orders_all").collect()
    assert len(found) == len({(row.shard, row.id) for row in found}), "a shard's row landed twice"
    return {(row.shard, row.id): row.name for row in found}


def shards_rows(mariadb) -> dict[tuple[str, int], str]:
    return {(shard, key): name for shard in SHARDS
            for key, name in mariadb.execute("SELECT id, name FROM orders", database=shard)}


def rows(spark, table: str) -> dict[int, str]:
    found = spark.table(f"lake.{DB}.{table}").collect()
    assert len(found) == len({row.id for row in found}), f"{table}: a row landed twice"
    return {row.id: row.name for row in found}


@pytest.mark.timeout(600)
def test_the_tables_a_rule_takes_are_snapshotted_while_the_stream_runs(canal, mariadb, spark, spark_settings):
    mariadb.create_database(DB)
    mariadb.execute(*(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)" for table in ROWS),
                    *(f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, '{table} {i}')" for i in range(1, n + 1))
                      for table, n in ROWS.items()),
                    SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
    for shard, n in SHARDS.items():
        mariadb.create_database(shard)
        mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)",
                        "INSERT INTO orders VALUES " + ", ".join(f"({i}, '{shard} {i}')" for i in range(1, n + 1)),
                        database=shard)
    mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS)
    mariadb.execute(*(f"GRANT SELECT ON `{shard}`.* TO '{USER}'@'%'" for shard in SHARDS))
    canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}(_s[0-9])?\..*"))  # its stream starts here
    snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=USER, password=PASSWORD,
                                signal_table=f"{DB}.{SIGNALS}", chunk_rows=30, parallelism=1)
    rule = ChannelSettings(f"{DB}.t_*", f"lake.{DB}.{{table}}", pattern=TablePattern(f"{DB}.t_*"))
    shards = ChannelSettings(f"{DB}_s?.orders", f"lake.{DB}.orders_all", pattern=TablePattern(f"{DB}_s?.orders"),
                             schema_column="shard", source_in_key=True)
    settings = JobSettings(DB, canal.canal_settings(DB, poll_timeout_ms=50), (rule, shards),
                           CommitSettings(interval_seconds=0.5, min_events=1, min_bytes=1), snapshot=snapshot)
    source = SnapshotSource(lambda: SourceDb(mariadb.host, mariadb.port, USER, PASSWORD),
                            SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD)),
                            SparkComparer(lambda: spark), SparkProgressReader(lambda: spark, DB))

    def new_job(**changes: object) -> SyncJob:
        return SyncJob(replace(settings, snapshot=replace(snapshot, **changes)),
                       lambda channel: make_sink(spark, channel, DB, spark_settings), snapshot=source)

    def caught_up() -> bool:  # (each channel commits on its own: every target, not the one last written)
        return all(rows(spark, table) == dict(mariadb.execute(f"SELECT id, name FROM {table}", database=DB))
                   for table in ("t_a", "t_b")) and merged_rows(spark) == shards_rows(mariadb)

    job = new_job()
    job.start()
    try:
        runner = job.snapshot
        assert runner is not None, "a job with rules looks for their tables"
        rounds = 0
        while not runner.finished.wait(0.1) and runner.alive:  # (paced by the snapshot: its chunks commit)
            rounds += 1
            # (Keys added within a bound: a table that grows all the while would be read all the while.)
            mariadb.execute(f"UPDATE t_a SET name = 'changed {rounds}' WHERE id = {rounds % 40 + 1}",
                            f"DELETE FROM t_b WHERE id = {rounds % 15 + 1}",  # (16-30 stay for the snapshot)
                            f"REPLACE INTO t_b VALUES ({1000 + rounds % 20}, 'new {rounds}')",
                            # (The same keys in both shards: the target tells them apart by schema.)
                            f"UPDATE {DB}_s1.orders SET name = 'changed {rounds}' WHERE id = {rounds % 30 + 1}",
                            f"REPLACE INTO {DB}_s2.orders VALUES ({rounds % 40 + 1}, 'new {rounds}')", database=DB)
        assert runner.finished.is_set() and job.state is JobState.RUNNING, job.fail_message
        assert rounds > 0 and sorted(runner.status()) == [f"{DB}.t_a", f"{DB}.t_b", *(f"{s}.orders" for s in SHARDS)]
        record = {channel.source: channel for channel in job.record().channels}
        assert record[f"{DB}.t_a"].rule == rule.source and record[f"{DB}.t_a"].snapshot.phase == "finished"
        merged = record[shards.source].snapshot  # (the shards' channel is named by the rule)
        # (At least the rows from before: a shard's keys written before its turn come in its snapshot too.)
        assert merged.phase == "finished" and merged.rows_done >= sum(SHARDS.values()), merged
        assert eventually(caught_up, 120), "every target equal to its table"
    finally:
        job.shutdown()
    assert TargetTable(spark, f"lake.{DB}.other").columns() is None, "no rule takes it"
    assert mariadb.execute(f"SELECT COUNT(*) FROM {SIGNALS}", database=DB) == [(0,)]

    again = new_job()  # every table the rule takes holds a finished snapshot: nothing is read again
    again.start()
    try:
        runner = again.snapshot
        assert runner is not None and eventually(lambda: not runner.alive, 120) and runner.finished.is_set()
        assert runner.tables == () and again.state is JobState.RUNNING
        # Rows changed behind the job's back (out of the binlog): a verify of a pattern's table finds them, and
        # a re-sync of such tables (named as the source spells them, or not) and of a merged shard repairs them.
        mariadb.execute("SET sql_log_bin = 0", "DELETE FROM t_a WHERE id = 5",
                        "UPDATE t_b SET name = 'behind' WHERE id = 25",
                        f"UPDATE {DB}_s1.orders SET name = 'behind' WHERE id = 3", database=DB)
        again.on_demand.verify([f"{DB}.t_b"])
        verify = again.verify
        assert verify is not None and eventually(lambda: not verify.running, 120)
        assert verify.checks()[f"{DB}.t_b"].phase == "differs", verify.checks()
        # (Shown on the pattern's channel for the table, though nothing streamed has opened it in this run.)
        shown = {channel.source: channel for channel in again.record().channels}[f"{DB}.t_b"]
        assert shown.verify is not None and shown.verify.phase == "differs"
        with pytest.raises(JobStateError, match="shares its target with the other tables its pattern merges"):
            again.on_demand.verify([f"{DB}_s1.orders"])
        with pytest.raises(KeyError, match="nor does any of its patterns take such a table"):
            again.on_demand.snapshot([f"{DB}.other"])
        started = again.on_demand.snapshot([f"{DB}.T_A", f"{DB}.t_b", f"{DB}_s1.orders"])
        assert started == {f"{DB}.t_a": f"{DB}.t_a", f"{DB}.t_b": f"{DB}.t_b", f"{DB}_s1.orders": shards.source}
        resync = again.snapshot
        assert resync is not None and eventually(lambda: not resync.alive, 120)
        assert resync.finished.is_set() and again.state is JobState.RUNNING, again.fail_message
        assert eventually(caught_up, 120), "the re-sync repaired every target, the deleted row removed too"
    finally:
        again.shutdown()
    only = new_job(mode="only")  # a snapshot-only job with a rule: done as it starts, then FINISHED
    only.start()
    try:
        assert only.wait_state(JobState.FINISHED, 120), (only.state, only.fail_message)
    finally:
        only.shutdown()
