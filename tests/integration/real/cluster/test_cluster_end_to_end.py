"""MariaDB -> real Canal -> the daemon on a Spark standalone cluster -> Iceberg in S3 through a JDBC catalog.

Nothing of the daemon's host but the driver reaches the executors: staged
rows travel in the tasks (``staging = "auto"`` on a cluster), the jars
through ``spark.jars``, the catalog's and the store's secrets from the
daemon's environment. A second Spark application (the test run's own)
reads the targets through the shared catalog while the daemon writes, and
afterwards every state that the main branch of the two tables of money
transfers ever showed: none holds half a source transaction.

Then, while SQL is written into one table, the cluster's parts fail in the
middle of commits: an executor SIGKILLed, and the object store killed and
started again, each once a commit has written a data file into the store
(the commit's metadata still to come). Every table ends equal to MariaDB,
with no row twice. (One daemon for both parts: each application's first
commit on the cluster takes most of a minute, shipping the jars.)

Before all that, a table written before Canal's start position is
snapshotted, and both executors are SIGKILLed once its first chunk is
handed over: the chunk rows the executors held went with them, and are
read again, not added again.
"""

from __future__ import annotations

import os
import random
import signal
import threading

import pytest

from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.model.position import EntryPosition
from spark_sink.stamp import POSITION_KEYS, position_from_summary
from tests.daemon_process import daemon_log, running_daemon, stop
from tests.infra.processes import wait_for
from tests.infra.shared_lake import CATALOG
from tests.infra.sql_source import UNSUBSCRIBED, PacedWriter, Source, mixed_setup, mixed_tables, mixed_workload
from tests.integration.real.cluster.daemon_on_cluster import cluster_sections, secret_env, wait_acked
from tests.integration.real.daemon_run import assert_target_equals_source, write_daemon_config
from tests.integration.real.test_transactions_whole import ACCOUNTS, START_AMOUNT, transfer_workload

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.cluster, pytest.mark.faults]

DB = "on_cluster"
TABLES = mixed_tables(DB)
ORDERS = next(table for table in TABLES if table.name == "orders")  # the table the faults' SQL writes
TRANSFERS = ("a", "b")
TOTAL = len(TRANSFERS) * ACCOUNTS * START_AMOUNT
ROUNDS = 2
HELD_ROWS = 2000  # of the snapshotted table, in chunks of 2 x 250 rows
SIGNALS = "canalbridge_signal"
SNAPSHOT_USER, SNAPSHOT_PASSWORD = "cluster_snapshotter", "cluster-snapshot-secret"


class Reader(threading.Thread):
    """Reads the targets through the shared catalog until told to stop: another application's view."""

    def __init__(self, spark, tables: list[str]) -> None:
        super().__init__(name="lake-reader", daemon=True)
        self.spark, self.tables = spark, tables
        self.done = threading.Event()
        self.reads = 0  # reads that found rows
        self.error: BaseException | None = None

    def run(self) -> None:
        from pyspark.errors import AnalysisException

        try:
            while not self.done.is_set():
                for table in self.tables:
                    try:
                        found = self.spark.table(table).count()
                    except AnalysisException as exc:
                        if "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
                            raise
                        continue  # not created yet: the daemon creates it with its first rows
                    self.reads += found > 0
                self.done.wait(0.5)
        except BaseException as exc:  # handed to the test
            self.error = exc


def transfers(mariadb, rng: random.Random, count: int) -> None:
    """``count`` transactions, each moving amounts between accounts of both tables."""
    with mariadb.connection(DB, autocommit=False) as conn, conn.cursor() as cursor:
        for _ in range(count):
            for _ in range(rng.randint(1, 4)):
                amount = rng.randint(1, 50)
                cursor.execute(f"UPDATE {rng.choice(TRANSFERS)} SET amount = amount - %s WHERE id = %s",
                               (amount, rng.randrange(ACCOUNTS)))
                cursor.execute(f"UPDATE {rng.choice(TRANSFERS)} SET amount = amount + %s WHERE id = %s",
                               (amount, rng.randrange(ACCOUNTS)))
            conn.commit()


def orders_transaction(source: Source) -> None:
    """An update, inserts, a key change and a delete of orders, in one transaction."""
    key = source.rng.choice(source.keys(ORDERS))
    source.update(ORDERS, key, source.row(ORDERS, key))
    source.insert(ORDERS, [source.row(ORDERS) for _ in range(source.rng.randint(1, 3))])
    old = source.rng.choice(source.keys(ORDERS))
    source.sql("UPDATE orders SET id = %s WHERE id = %s", source.new_key(ORDERS)[0], old[0])
    source.sql("DELETE FROM orders WHERE id = %s", source.rng.choice(source.keys(ORDERS))[0])
    source.commit()


def states_main_showed(spark, table: str) -> list[tuple[EntryPosition, dict[int, int]]]:
    """Each state a reader of ``table``'s main could see, with the source position its commit carried."""
    snapshots = spark.sql(f"SELECT h.snapshot_id, s.summary FROM {table}.history h JOIN {table}.snapshots s "
                          f"ON h.snapshot_id = s.snapshot_id ORDER BY h.made_current_at").collect()
    states = []
    for row in snapshots:
        if POSITION_KEYS["journal"] not in row["summary"]:
            continue  # not one of the job's commits (maintenance)
        amounts = {r["id"]: r["amount"] for r in spark.sql(
            f"SELECT id, amount FROM {table} VERSION AS OF {row['snapshot_id']}").collect()}
        position = position_from_summary(dict(row["summary"]))
        assert isinstance(position, EntryPosition)
        states.append((position, amounts))
    return states


@pytest.mark.timeout(1200)
def test_the_daemon_on_a_cluster_lands_every_type_and_whole_transactions_in_s3_through_faults(
        real_destination, canal, mariadb, spark_cluster, s3_store, lake, lake_reader, tmp_path, monkeypatch):
    setup = mixed_setup(TABLES) + [f"CREATE TABLE {t} (id INT PRIMARY KEY, amount BIGINT NOT NULL)"
                                   for t in TRANSFERS] + [
        "CREATE TABLE held (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)",
        "INSERT INTO held VALUES " + ", ".join(f"({i}, 'held {i}')" for i in range(1, HELD_ROWS + 1)),
        SIGNAL_TABLE_DDL.format(table=SIGNALS)]
    real_destination(DB, setup=setup)
    mariadb.snapshot_user(SNAPSHOT_USER, SNAPSHOT_PASSWORD, DB, SIGNALS)
    names = [t.name for t in TABLES] + list(TRANSFERS) + ["held"]
    channels = "\n".join(f'[[job.channel]]\nsource = "{DB}.{name}"\ntarget = "{CATALOG}.{DB}.{name}"' for name in names)
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, "", channels,
                                 spark=cluster_sections(spark_cluster, lake),
                                 # Only the store may cut a source transaction, never a wait; retries enough
                                 # to outlast the store's restart (the default five take about three seconds).
                                 commit="max_source_txn_wait_seconds = 600\nretries = 30")
    snapshot = (f'[job.snapshot]\nhost = "{mariadb.host}"\nport = {mariadb.port}\nuser = "{SNAPSHOT_USER}"\n'
                f'password = "{SNAPSHOT_PASSWORD}"\nsignal_table = "{DB}.{SIGNALS}"\nchunk_rows = 250\n'
                'parallelism = 2\n')
    config.write_text(config.read_text().replace("[[job.channel]]", snapshot + "[[job.channel]]", 1))
    for variable, value in secret_env(lake).items():
        monkeypatch.setenv(variable, value)  # the daemon's environment, as a service manager would set it
    orders_dir = s3_store.bucket_dir / "warehouse" / DB / "orders" / "data"

    def data_files() -> int:
        return sum(1 for _ in orders_dir.rglob("*.parquet")) if orders_dir.is_dir() else 0

    def next_data_file(timeout_s: float = 120) -> None:
        """Until a commit writes a data file of orders: the rest of that commit is under way."""
        before = data_files()
        assert wait_for(lambda: data_files() > before, timeout_s, alive=lambda: daemon.poll() is None), (
            daemon_log(config)[-3000:])

    source = Source(mariadb, DB, TABLES, seed=36)
    reader = Reader(lake_reader, [f"{CATALOG}.{DB}.{name}" for name in TRANSFERS])
    reader.start()
    try:
        with running_daemon(config) as daemon:
            # Both executors killed once a chunk of held is handed over: the rows they held for it (and for the
            # chunk read after it) are gone; the workers start new executors, and those chunks are read again.
            assert wait_for(lambda: '"event": "channel.chunk"' in daemon_log(config), 600,
                            alive=lambda: daemon.poll() is None), daemon_log(config)[-3000:]
            executors = spark_cluster.executor_pids()
            assert len(executors) == 2, executors
            for executor in executors:
                os.kill(executor, signal.SIGKILL)
            assert wait_for(lambda: '"event": "snapshot.finished"' in daemon_log(config), 600,
                            alive=lambda: daemon.poll() is None), daemon_log(config)[-3000:]
            rng = random.Random(36)
            transfer_workload(mariadb, rng, transactions=20, database=DB)
            for _ in range(ROUNDS):  # each round acked before the next: a commit (a cut) per round at least
                transfers(mariadb, rng, 10)
                wait_acked(daemon, config, mariadb)
            mixed_workload(source, TABLES, rounds=8)
            wait_acked(daemon, config, mariadb)
            assert daemon.poll() is None, daemon_log(config)[-3000:]
            assert spark_cluster.app_cores() == 2  # the daemon's executors hold both workers' cores
            reader.done.set()  # (its reads would fail while the store is down)
            reader.join(60)
            assert not reader.is_alive() and reader.error is None, reader.error

            writer = PacedWriter(source, orders_transaction, every_s=0.05)
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
    finally:
        reader.done.set()
        reader.join(60)
    assert reader.error is None, reader.error
    assert reader.reads > 0
    for secret in [*lake.secrets.values(), canal.canal_settings(DB).password, SNAPSHOT_PASSWORD]:
        assert secret not in log

    assert writer.count > 10
    assert {row.id: row.name for row in lake_reader.table(f"{CATALOG}.{DB}.held").collect()} == {
        i: f"held {i}" for i in range(1, HELD_ROWS + 1)}, "the snapshot's rows, once each"
    for table in TABLES:
        assert_target_equals_source(lake_reader, source, table, f"{CATALOG}.{DB}.{table.name}")
    rows = lake_reader.table(f"{CATALOG}.{DB}.orders").count()
    assert rows == len(source.keys(ORDERS)), "a row of orders twice"
    tables = {row["tableName"] for row in lake_reader.sql(f"SHOW TABLES IN {CATALOG}.{DB}").collect()}
    assert UNSUBSCRIBED not in tables
    states = {name: states_main_showed(lake_reader, f"{CATALOG}.{DB}.{name}") for name in TRANSFERS}
    cuts = sorted({position for table_states in states.values() for position, _ in table_states})
    assert len(cuts) > ROUNDS, cuts
    for cut in cuts:
        at_cut = [next((amounts for position, amounts in reversed(table_states) if position <= cut), {})
                  for table_states in states.values()]
        assert sum(sum(amounts.values()) for amounts in at_cut) == TOTAL, f"half a transaction visible at {cut}"
    for name in TRANSFERS:
        expected = dict(mariadb.execute(f"SELECT id, amount FROM {name}", database=DB))
        assert states[name][-1][1] == expected
    objects = [path for path in s3_store.bucket_dir.rglob("*") if path.is_file()]
    assert any(path.suffix == ".parquet" for path in objects)  # the data is in the store, not on a disk of ours
