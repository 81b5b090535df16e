"""MariaDB -> real Canal -> the daemon -> Iceberg, compared cell by cell with the database.

The source of truth is MariaDB itself: after the workload, every target
table must equal ``SELECT *`` of its source table, converted by the rules of
``spark_sink/types.py`` (written out independently in
``canalbridge.devkit.verify.typed``).
"""

from __future__ import annotations

import pytest

from canalbridge.devkit.catalog import ACCOUNTS_COLUMNS, ALL_TYPES_COLUMNS, ORDERS_COLUMNS
from canalbridge.devkit.entries import ColumnDef, TableDef
from canalbridge.sync.position import EntryPosition
from tests.daemon_process import daemon_log, job_status, running_daemon, stop
from tests.helpers import eventually
from tests.real.sql_source import Source, acked_through, assert_target_equals_source, create_sql, write_daemon_config

pytestmark = [pytest.mark.real, pytest.mark.spark]

DB = "e2e"
TABLES = (
    TableDef(DB, "all_types", ALL_TYPES_COLUMNS),
    TableDef(DB, "orders", ORDERS_COLUMNS),
    TableDef(DB, "accounts", ACCOUNTS_COLUMNS),
    TableDef(DB, "order", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("select", "varchar(20)"))),
)
UNSUBSCRIBED = "skipped"


def run_workload(source: Source) -> None:
    """DML of every shape the issue lists; each numbered block is one MariaDB transaction."""
    all_types, orders, accounts, reserved = TABLES
    # 1. Multi-row statements into every table, extremes and NULLs included.
    for table in TABLES:
        source.insert(table, [source.row(table) for _ in range(25)])
    source.commit()
    for round_number in range(30):
        # 2. Several tables in one transaction, several statements each.
        for table in (all_types, orders, accounts):
            keys = source.keys(table)
            key = source.rng.choice(keys)
            source.update(table, key, source.row(table, key))
            source.insert(table, [source.row(table)])
        # 3. An update that changes the primary key, and a delete then re-insert of one key.
        old = source.rng.choice(source.keys(orders))
        new = source.new_key(orders)
        source.sql("UPDATE orders SET id = %s WHERE id = %s", new[0], old[0])
        gone = source.rng.choice(source.keys(accounts))
        source.sql("DELETE FROM accounts WHERE tenant = %s AND id = %s", *gone)
        source.insert(accounts, [source.row(accounts, gone)])
        # 4. A table named by a reserved word, and a table no channel reads.
        source.sql("UPDATE `order` SET `select` = %s WHERE id = %s", f"round {round_number}",
                   source.rng.choice(source.keys(reserved))[0])
        source.sql(f"INSERT INTO {UNSUBSCRIBED} VALUES (%s)", round_number)
        source.commit()
        if round_number % 7 == 3:
            # 5. A rolled-back transaction: nothing of it may appear.
            source.sql("DELETE FROM orders")
            source.insert(all_types, [source.row(all_types)])
            source.rollback()
        if round_number % 5 == 0:
            # 6. A multi-row delete.
            source.sql("DELETE FROM all_types WHERE id IN (%s, %s)", *[k[0] for k in source.keys(all_types)[:2]])
            source.commit()


@pytest.mark.timeout(600)
def test_a_mixed_workload_lands_equal_to_mariadb(real_destination, canal, mariadb, spark, spark_settings, tmp_path):
    setup = [create_sql(table) for table in TABLES] + [f"CREATE TABLE {UNSUBSCRIBED} (id INT PRIMARY KEY)"]
    real_destination(DB, setup=setup)
    password = canal.canal_settings(DB).password
    channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.real_{DB}.{t.name}"'
                         for t in TABLES)
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, spark_settings.warehouse, channels)
    source = Source(mariadb, DB, TABLES, seed=12)
    with running_daemon(config) as daemon:
        run_workload(source)
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 240), (
            f"not acked through {last}: {job_status(config, 'real')}")
        assert daemon.poll() is None, daemon_log(config)[-3000:]
        log = stop(daemon, config)
    assert password not in log

    for table in TABLES:
        assert_target_equals_source(spark, source, table, f"lake.real_{DB}.{table.name}")
    tables = {row["tableName"] for row in spark.sql(f"SHOW TABLES IN lake.real_{DB}").collect()}
    assert UNSUBSCRIBED not in tables
