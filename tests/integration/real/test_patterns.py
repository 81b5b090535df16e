"""Channels by pattern through real Canal and MariaDB: shards merged into one Iceberg target, a table created
mid-run picked up without a restart, and ALTERs run shard by shard applied to the shared target once.

Canal runs with ``canal.instance.tsdb.enable=false``, as every real test:
each ALTER waits until the job acked what came before it (see test_ddl).
"""

from __future__ import annotations

import pytest

from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from tests.infra.canal_server import CanalDestination

pytestmark = [pytest.mark.real, pytest.mark.spark]

COMMIT = CommitSettings(interval_seconds=0.2, min_events=1, min_bytes=1, retries=0)
SCHEMAS = ("pats_0", "pats_1")
SHARDS = tuple((schema, table) for schema in SCHEMAS for table in ("orders_0", "orders_1"))
ORDERS = "CREATE TABLE {} (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2))"


def caught_up(job: SyncJob, mariadb) -> None:
    """Until the job acked the newest transaction (Canal has read, and the targets hold, all of it)."""
    assert job.acks.wait_through(EntryPosition(*mariadb.last_event_start("Xid")), 120), (
        f"{job.state} {job.fail_message} {job.stats}")


def source_rows(mariadb, schema: str, table: str, columns: str) -> set[tuple]:
    return set(mariadb.execute(f"SELECT {columns} FROM `{schema}`.`{table}`"))


def target_rows(spark, target: str, columns: str) -> set[tuple]:
    spark.sql(f"REFRESH TABLE {quote_table(target)}")  # (the job wrote it through its own table handle)
    return {tuple(row) for row in spark.sql(f"SELECT {columns} FROM {quote_table(target)}").collect()}


def test_shards_merge_and_new_tables_appear_while_the_source_changes_its_columns(canal, mariadb, spark,
                                                                                 spark_settings):
    for schema in SCHEMAS:
        mariadb.create_database(schema)
        mariadb.execute(ORDERS.format("orders_0"), ORDERS.format("orders_1"), database=schema)
    canal.add_destination(CanalDestination("pats", filter_regex=r"pats_\d\..*"))
    settings = JobSettings("pats", canal.canal_settings("pats", poll_timeout_ms=50, batch_size=64), (
        ChannelSettings("pats_*.orders_*", "lake.pats.orders", pattern=TablePattern("pats_*.orders_*"),
                        schema_column="src_schema", table_column="src_table", source_in_key=True),
        ChannelSettings("pats_*.*", "lake.pats.{schema}_{table}", pattern=TablePattern("pats_*.*")),
    ), COMMIT)
    job = SyncJob(settings, lambda channel: make_sink(spark, channel, "pats", spark_settings))
    job.start()
    try:
        def orders_round(n: int, *, noted: dict[str, str]) -> None:
            # The same keys in every shard: only the source columns tell their rows apart.
            for schema, table in SHARDS:
                name = f"`{schema}`.`{table}`"
                column = noted.get(f"{schema}.{table}")
                note = f", {column}" if column else ""
                value = f", 'n{n}'" if note else ""
                mariadb.execute(f"INSERT INTO {name} (id, name, amount{note}) VALUES ({n}, '{table}', {n}.25{value})",
                                f"UPDATE {name} SET amount = amount + 1 WHERE id = {max(n - 1, 1)}",
                                f"DELETE FROM {name} WHERE id = {n - 2}" if n % 3 == 0 else "DO 0")

        noted: dict[str, str] = {}  # shard -> the name its note column has
        for n in range(1, 5):
            orders_round(n, noted=noted)
        caught_up(job, mariadb)
        # A table created while the job runs: its own target, without a restart.
        mariadb.execute("CREATE TABLE customers (id INT PRIMARY KEY, email VARCHAR(40))",
                        "INSERT INTO customers VALUES (1, 'a@x'), (2, 'b@x')", database="pats_0")
        # The same ALTER, shard by shard, with rows in between: the shared target gets the column once.
        for schema, table in SHARDS:
            caught_up(job, mariadb)
            mariadb.execute(f"ALTER TABLE `{table}` ADD COLUMN note VARCHAR(10) AFTER name", database=schema)
            noted[f"{schema}.{table}"] = "note"
            orders_round(len(noted) + 4, noted=noted)
        # A rename, shard by shard: the shards not yet renamed go on writing the old name into the new column.
        for n, (schema, table) in enumerate(SHARDS):
            caught_up(job, mariadb)
            mariadb.execute(f"ALTER TABLE `{table}` RENAME COLUMN note TO remark", database=schema)
            noted[f"{schema}.{table}"] = "remark"
            orders_round(n + 9, noted=noted)
        mariadb.execute("UPDATE customers SET email = 'b@y' WHERE id = 2", "INSERT INTO customers VALUES (3, 'c@x')",
                        database="pats_0")
        caught_up(job, mariadb)
        assert job.state is JobState.RUNNING, job.fail_message
        record = {c.source: c for c in job.record().channels}
    finally:
        job.shutdown()

    expected = set()
    for schema, table in SHARDS:
        expected |= {(*row, schema, table) for row in source_rows(mariadb, schema, table, "id, name, remark, amount")}
    assert len(expected) > 20
    assert target_rows(spark, "lake.pats.orders", "id, name, remark, amount, src_schema, src_table") == expected
    columns = spark.table(quote_table("lake.pats.orders")).columns
    assert columns == ["id", "name", "remark", "amount", "src_schema", "src_table"]
    assert target_rows(spark, "lake.pats.pats_0_customers", "id, email") == source_rows(
        mariadb, "pats_0", "customers", "id, email")
    assert {source: (c.target, c.rule) for source, c in record.items()} == {
        "pats_*.orders_*": ("lake.pats.orders", "pats_*.orders_*"),
        "pats_0.customers": ("lake.pats.pats_0_customers", "pats_*.*")}
    assert all(c.committed is not None for c in record.values())
