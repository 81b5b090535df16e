"""A job whose targets live behind an Iceberg REST catalog, in an S3-compatible store: the daemon started while
the catalog is down (the job pauses for the outage), then while the store is down, runs by itself once each is
back, and its target (snapshot and stream) ends equal to MariaDB."""

from __future__ import annotations

import pytest

from canalbridge.devkit.catalog import ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.model.position import EntryPosition
from tests.daemon_process import daemon_log, job_status, log_path, running_daemon, stop
from tests.helpers import eventually
from tests.infra.canal_server import CanalDestination
from tests.infra.rest_catalog import RestCatalogServer
from tests.infra.s3proxy import CLIENT_ENV, S3ProxyServer, store_client_in
from tests.infra.sql_source import Source, create_sql
from tests.integration.real.daemon_run import (
    acked_through,
    assert_target_equals_source,
    spark_section,
    write_daemon_config,
)

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.faults]

DB = "restcat"
ORDERS = TableDef(DB, "orders", ORDERS_COLUMNS)
SIGNALS = "canalbridge_signal"
USER, PASSWORD = "rest_reader", "rest-reader-secret"
CATALOG = "rest"
TARGET = f"{CATALOG}.{DB}.orders"
SECRET_VARIABLE = "REST_S3_SECRET"
SECRET_KEY = f"spark.sql.catalog.{CATALOG}.s3.secret-access-key"  # from SECRET_VARIABLE, not the file
STORE_RETRY = "Retrying task after failure"  # the catalog's log, each time it tries the store again


def catalog_keys(catalog: RestCatalogServer, store: S3ProxyServer) -> dict[str, str]:
    """The Spark keys of a client of the REST catalog over the store, its secret key among them."""
    return {**catalog.spark_conf(CATALOG), **{f"spark.sql.catalog.{CATALOG}.{key}": value
                                              for key, value in store.iceberg_properties().items()}}


def outage_pause(config) -> dict | None:
    """The job's status while it waits to start again after an outage."""
    status = job_status(config, "real")
    return status if status and status["state"] == "PAUSED" and status["start_retry"] else None


@pytest.mark.timeout(900)
def test_a_job_through_a_rest_catalog_starts_by_itself_once_the_catalog_and_then_the_store_are_back(
        canal, mariadb, spark, tmp_path, monkeypatch):
    store = S3ProxyServer(tmp_path / "s3").start()
    catalog = RestCatalogServer(tmp_path / "rest", f"s3://{store.bucket}/warehouse",
                                properties=store.iceberg_properties(), env=CLIENT_ENV)  # not started: down
    try:
        mariadb.create_database(DB)
        mariadb.execute(create_sql(ORDERS), SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
        source = Source(mariadb, DB, (ORDERS,), seed=73)
        source.insert(ORDERS, [source.row(ORDERS) for _ in range(300)])
        source.commit()
        canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}\..*"))
        mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS)
        section = spark_section(CATALOG, catalog_keys(catalog, store), SECRET_KEY, SECRET_VARIABLE)
        config = write_daemon_config(
            tmp_path / "canalbridge.toml", canal, DB, "unused", f'[[job.channel]]\nsource = "{ORDERS.qualified}"\n'
            f'target = "{TARGET}"', spark=section, commit="retry_max_seconds = 2")
        snapshot = (f'[job.snapshot]\nhost = "{mariadb.host}"\nport = {mariadb.port}\nuser = "{USER}"\n'
                    f'password = "{PASSWORD}"\nsignal_table = "{DB}.{SIGNALS}"\nchunk_rows = 100\n')
        config.write_text(config.read_text().replace("[[job.channel]]", snapshot + "[[job.channel]]", 1))
        for key, value in {**CLIENT_ENV, SECRET_VARIABLE: store.secret_key}.items():
            monkeypatch.setenv(key, value)  # (the daemon's environment: tests.daemon_process passes this one on)

        # The catalog is down when the daemon starts: the job waits, and starts once the catalog answers.
        with running_daemon(config) as daemon:
            seen: list[dict] = []  # (the status that showed it: the next try may be under way by now)

            def paused() -> bool:
                status = outage_pause(config)
                seen.extend([status] if status else [])
                return daemon.poll() is not None or status is not None

            assert eventually(paused, 180) and daemon.poll() is None, daemon_log(config)[-3000:]
            assert seen[0]["fail_message"]["kind"] == "OUTAGE" and TARGET in seen[0]["fail_message"]["text"], seen
            catalog.start()
            insert_and_wait(source, mariadb, config, daemon, batches=10)
            assert eventually(lambda: '"snapshot.finished"' in daemon_log(config), 120), daemon_log(config)[-3000:]
            stop(daemon, config)

        # The store is down when the daemon starts. The catalog reads the table's metadata from it, and retries
        # for minutes before it fails the request (Iceberg's metastore tables do): the start waits meanwhile,
        # and goes on once the store is back.
        store.stop()
        source.insert(ORDERS, [source.row(ORDERS) for _ in range(20)])
        source.commit()
        retried = catalog.log_file.read_text().count(STORE_RETRY)
        with running_daemon(config) as daemon:
            assert eventually(lambda: daemon.poll() is not None
                              or catalog.log_file.read_text().count(STORE_RETRY) > retried, 180), (
                daemon_log(config)[-3000:])
            assert daemon.poll() is None, daemon_log(config)[-3000:]
            store.start()
            insert_and_wait(source, mariadb, config, daemon, batches=5)
            log = stop(daemon, config)
        assert store.secret_key not in log and store.secret_key not in log_path(config).read_text()

        store_client_in(spark)
        for key, value in catalog_keys(catalog, store).items():
            spark.conf.set(key, value)
        assert_target_equals_source(spark, source, ORDERS, TARGET)
        assert spark.table(TARGET).count() == 300 + 10 * 4 + 20 + 5 * 4
    finally:
        catalog.stop()
        store.stop()


def insert_and_wait(source: Source, mariadb, config, daemon, batches: int) -> None:
    """Stream ``batches`` transactions of four rows and wait until the daemon acked the last."""
    for _ in range(batches):
        source.insert(ORDERS, [source.row(ORDERS) for _ in range(4)])
        source.update(ORDERS, (5,), source.row(ORDERS, (5,)))
        source.commit()
    last = EntryPosition(*mariadb.last_event_start("Xid"))
    assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 300), (
        job_status(config, "real"), daemon_log(config)[-3000:])
    assert daemon.poll() is None, daemon_log(config)[-3000:]
