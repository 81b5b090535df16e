"""MariaDB -> real Canal -> the daemon -> Iceberg, compared cell by cell with the database.

The source of truth is MariaDB itself: after the workload, every target
table must equal ``SELECT *`` of its source table, converted by the rules of
``spark_sink/types.py`` (written out independently in
``canalbridge.devkit.verify.typed``).
"""

from __future__ import annotations

import pytest

from canalbridge.sync.position import EntryPosition
from tests.daemon_process import daemon_log, job_status, running_daemon, stop
from tests.helpers import eventually
from tests.infra.sql_source import UNSUBSCRIBED, Source, mixed_setup, mixed_tables, mixed_workload
from tests.integration.real.daemon_run import acked_through, assert_target_equals_source, write_daemon_config

pytestmark = [pytest.mark.real, pytest.mark.spark]

DB = "e2e"
TABLES = mixed_tables(DB)


@pytest.mark.timeout(600)
def test_a_mixed_workload_lands_equal_to_mariadb(real_destination, canal, mariadb, spark, spark_settings, tmp_path):
    real_destination(DB, setup=mixed_setup(TABLES))
    password = canal.canal_settings(DB).password
    channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.real_{DB}.{t.name}"'
                         for t in TABLES)
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, spark_settings.warehouse, channels)
    source = Source(mariadb, DB, TABLES, seed=12)
    with running_daemon(config) as daemon:
        mixed_workload(source, TABLES)
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
