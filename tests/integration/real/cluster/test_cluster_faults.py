"""Faults of the cluster's parts in the middle of commits: an executor SIGKILLed, the object store restarted.

Each lands when a commit has just written a data file into the store (the
commit's metadata is still to come) while SQL is being written. At the end
the target equals MariaDB cell by cell, with no row twice.
"""

from __future__ import annotations

import os
import signal

import pytest

from canalbridge.devkit.catalog import ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from tests.daemon_process import daemon_log, running_daemon, stop
from tests.infra.processes import wait_for
from tests.infra.sql_source import PacedWriter, Source, create_sql
from tests.integration.real.cluster.daemon_on_cluster import CATALOG, cluster_sections, secret_env, wait_acked
from tests.integration.real.daemon_run import assert_target_equals_source, write_daemon_config

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.cluster, pytest.mark.faults]

DB = "cluster_faults"
ORDERS = TableDef(DB, "orders", ORDERS_COLUMNS)


def transaction(source: Source) -> None:
    """An update, inserts, a key change and a delete, in one transaction."""
    key = source.rng.choice(source.keys(ORDERS))
    source.update(ORDERS, key, source.row(ORDERS, key))
    source.insert(ORDERS, [source.row(ORDERS) for _ in range(source.rng.randint(1, 3))])
    old = source.rng.choice(source.keys(ORDERS))
    source.sql("UPDATE orders SET id = %s WHERE id = %s", source.new_key(ORDERS)[0], old[0])
    source.sql("DELETE FROM orders WHERE id = %s", source.rng.choice(source.keys(ORDERS))[0])
    source.commit()


@pytest.mark.timeout(900)
def test_an_executor_killed_and_the_store_restarted_mid_commit_lose_nothing_and_repeat_nothing(
        real_destination, canal, mariadb, spark_cluster, s3_store, lake, lake_reader, tmp_path, monkeypatch):
    real_destination(DB, setup=[create_sql(ORDERS)])
    channels = f'[[job.channel]]\nsource = "{DB}.orders"\ntarget = "{CATALOG}.{DB}.orders"'
    # Retries enough to outlast the store's restart (the default five take about three seconds here).
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, "", channels,
                                 spark=cluster_sections(spark_cluster, lake), commit="retries = 30")
    for variable, value in secret_env(lake).items():
        monkeypatch.setenv(variable, value)
    table_dir = s3_store.bucket_dir / "warehouse" / DB / "orders" / "data"

    def data_files() -> int:
        return sum(1 for _ in table_dir.rglob("*.parquet")) if table_dir.is_dir() else 0

    def next_data_file(timeout_s: float = 120) -> None:
        """Until a commit writes a data file: the rest of that commit is under way."""
        before = data_files()
        assert wait_for(lambda: data_files() > before, timeout_s, alive=lambda: daemon.poll() is None), (
            daemon_log(config)[-3000:])

    source = Source(mariadb, DB, (ORDERS,), seed=362)
    source.insert(ORDERS, [source.row(ORDERS) for _ in range(40)])
    source.commit()
    with running_daemon(config) as daemon:
        wait_acked(daemon, config, mariadb)  # the executors run
        writer = PacedWriter(source, transaction, every_s=0.05)
        try:
            next_data_file()
            executors = spark_cluster.executor_pids()
            assert executors, "no executor runs"
            os.kill(executors[0], signal.SIGKILL)
            next_data_file()  # commits go on with the executor the worker starts instead
            next_data_file()
            failures = daemon_log(config).count("channel.commit_failed")
            s3_store.kill()
            assert wait_for(lambda: daemon_log(config).count("channel.commit_failed") > failures, 120), (
                "no commit met the store's outage")
            s3_store.start()
            next_data_file(180)
        finally:
            writer.finish()
        wait_acked(daemon, config, mariadb)
        assert daemon.poll() is None, daemon_log(config)[-3000:]
        log = stop(daemon, config)
    assert writer.count > 10
    for secret in lake.secrets.values():
        assert secret not in log

    assert_target_equals_source(lake_reader, source, ORDERS, f"{CATALOG}.{DB}.orders")
    rows = lake_reader.table(f"{CATALOG}.{DB}.orders").count()
    assert rows == len(source.keys(ORDERS)), "a row twice"
