"""Transactions stay whole against real Canal on MariaDB.

MariaDB writes no BEGIN: Canal hands the client a transaction as the
annotated SQL of each statement (ROWDATA, event type QUERY), its rows, and a
TRANSACTIONEND. A Consumer that waits for TRANSACTIONBEGIN to see a
transaction open commits at any batch end inside one. Here transactions
move amounts between rows of two tables, so the total over both tables is
the same at every cut the bridge commits: a cut inside a transaction shows
a different total.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest

from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.source import SnapshotSource
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from tests.infra.memory_writer import InMemoryWriter, SealedInMemory

pytestmark = pytest.mark.real

DB = "transfers"
ACCOUNTS = 12
START_AMOUNT = 1000
TOTAL = 2 * ACCOUNTS * START_AMOUNT
TABLES = ("a", "b")


@dataclass
class SnapshottingWriter(InMemoryWriter):
    """Keeps the table as it stood after each commit, keyed by the commit's position."""

    snapshots: list[tuple[EntryPosition, dict[str, int]]] = field(default_factory=list)
    _snapshot_lock: threading.Lock = field(default_factory=threading.Lock)

    def _apply(self, sealed: SealedInMemory, end_position: EntryPosition, label: str, publish: bool,
               behind: EntryPosition | None) -> None:
        super()._apply(sealed, end_position, label, publish, behind)
        if not publish:
            return  # held: readers see nothing of it yet
        amounts = {key[0]: int(row["amount"]) for key, row in self.rows.items()}
        with self._snapshot_lock:
            self.snapshots.append((end_position, amounts))


def amounts_at(writer: SnapshottingWriter, cut: EntryPosition) -> dict[str, int]:
    """The table as of ``cut``: after its last commit at or before it."""
    state: dict[str, int] = {}
    for position, amounts in writer.snapshots:
        if position <= cut:
            state = amounts
    return state


def transfer_workload(mariadb, rng: random.Random, transactions: int, database: str = DB) -> None:
    """Move amounts between accounts of both tables, in many shapes of transaction."""
    with mariadb.connection(database, autocommit=False) as conn, conn.cursor() as cursor:
        for table in TABLES:
            cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s)",
                               [(i, START_AMOUNT) for i in range(ACCOUNTS)])
        conn.commit()
        for number in range(transactions):
            shape = number % 5
            for _ in range(rng.randint(1, 4)):
                source, target = rng.choice(TABLES), rng.choice(TABLES)
                amount = rng.randint(1, 50)
                cursor.execute(f"UPDATE {source} SET amount = amount - %s WHERE id = %s",
                               (amount, rng.randrange(ACCOUNTS)))
                cursor.execute(f"UPDATE {target} SET amount = amount + %s WHERE id = %s",
                               (amount, rng.randrange(ACCOUNTS)))
            if shape == 1:  # one statement, many rows, balanced by one row
                cursor.execute("UPDATE a SET amount = amount + 1 WHERE id < 4")
                cursor.execute("UPDATE b SET amount = amount - 4 WHERE id = %s", (rng.randrange(ACCOUNTS),))
            elif shape == 2:  # delete and re-insert one key
                key = rng.randrange(ACCOUNTS)
                cursor.execute("SELECT amount FROM b WHERE id = %s", (key,))
                (held,) = cursor.fetchone()
                cursor.execute("DELETE FROM b WHERE id = %s", (key,))
                cursor.execute("INSERT INTO b VALUES (%s, %s)", (key, held))
            if shape == 3:  # a rolled-back transaction must leave no trace
                cursor.execute("UPDATE a SET amount = amount + 1000000 WHERE id = 0")
                conn.rollback()
            else:
                conn.commit()


def test_every_cut_through_real_canal_keeps_the_total(real_destination, canal, mariadb):
    real_destination(DB, setup=[f"CREATE TABLE {t} (id INT PRIMARY KEY, amount BIGINT NOT NULL)" for t in TABLES])
    writers: dict[str, SnapshottingWriter] = {}

    def sink_for(channel: ChannelSettings) -> ChannelSink:
        writer = writers[channel.source] = SnapshottingWriter(channel.source)
        return ChannelSink.of(writer)

    # Small gets (1 KB in Canal's MEMSIZE mode) and eager commits: many cuts, and
    # batch ends inside most transactions.
    commit = CommitSettings(interval_seconds=0.05, min_events=1, min_bytes=1, max_source_txn_wait_seconds=120)
    settings = JobSettings("transfers", canal.canal_settings(DB, batch_size=1, poll_timeout_ms=50),
                           tuple(ChannelSettings(f"{DB}.{t}", f"lake.{DB}.{t}") for t in TABLES), commit)
    job = SyncJob(settings, sink_for)
    job.start()
    try:
        transfer_workload(mariadb, random.Random(7), transactions=150)
        last_commit = EntryPosition(*mariadb.last_event_start("Xid"))
        assert job.acks.wait_through(last_commit, 120), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()

    stats = job.stats
    assert stats.split_source_txns == 0
    cuts = sorted({position for writer in writers.values() for position, _ in writer.snapshots})
    assert len(cuts) > 20, len(cuts)
    for cut in cuts:
        tables = [amounts_at(writers[f"{DB}.{t}"], cut) for t in TABLES]
        if any(tables):
            assert sum(sum(t.values()) for t in tables) == TOTAL, f"half a transaction committed through {cut}"
    for table in TABLES:
        expected = dict(mariadb.execute(f"SELECT id, amount FROM {table}", database=DB))
        assert amounts_at(writers[f"{DB}.{table}"], cuts[-1]) == {str(k): v for k, v in expected.items()}


def ending_elsewhere(mariadb, db: str, other: str) -> None:
    """Transactions whose last statement writes to ``other``, which the job's filter leaves out: each
    statement a transaction of its own (Canal lets one filtered end through per 5 s of binlog time: these
    take it), then rows of keys 0 to 5 in ``db.t``, the last one's transaction ending in ``other``."""
    for key in range(5):
        mariadb.execute(f"INSERT INTO {db}.t VALUES ({key}, {key})", f"INSERT INTO {other}.t VALUES ({key}, {key})")
    with mariadb.connection(autocommit=False) as conn, conn.cursor() as cursor:  # rows, then elsewhere
        cursor.execute(f"INSERT INTO {db}.t VALUES (5, 5)")
        cursor.execute(f"INSERT INTO {other}.t VALUES (5, 5)")
        conn.commit()


def test_a_transaction_whose_end_canal_dropped_commits_after_the_wait_bound(real_destination, canal, mariadb):
    # MariaDB annotates each statement with its SQL, which Canal hands out even when its filter takes out the
    # statement's rows; it then drops the transaction's end as well (docs/design/delivery-semantics.md). A
    # transaction whose last statement wrote elsewhere stays open to the bridge when the source goes quiet:
    # nothing tells it apart from one whose rows are still coming, so it commits once max_source_txn_wait
    # passes, as a split it logs and counts, and everything is acked.
    db, other = "filtered_out", "filtered_out_other"
    real_destination(db, setup=["CREATE TABLE t (id INT PRIMARY KEY, v INT)"])
    mariadb.create_database(other)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database=other)
    writers: dict[str, InMemoryWriter] = {}

    def sink_for(channel: ChannelSettings) -> ChannelSink:
        writer = writers[channel.source] = InMemoryWriter(channel.source)
        return ChannelSink.of(writer)

    commit = CommitSettings(interval_seconds=0.2, min_events=1, min_bytes=1, max_source_txn_wait_seconds=2)
    channels = (ChannelSettings(f"{db}.t", f"lake.{db}.t"),)
    settings = JobSettings(db, canal.canal_settings(db, poll_timeout_ms=50), channels, commit)
    job = SyncJob(settings, sink_for)
    job.start()
    try:
        ending_elsewhere(mariadb, db, other)
        last = EntryPosition(*mariadb.last_event_start("Annotate_rows"))
        assert job.acks.wait_through(last, 60), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()
    assert job.stats.split_source_txns >= 1
    assert {int(key[0]) for key in writers[f"{db}.t"].rows} == set(range(6))


def test_a_heartbeat_proves_the_transaction_over_and_the_ack_reaches_the_source_end(real_destination, canal,
                                                                                   mariadb):
    # The same filtered last statement, in a job with a signal table: once the source is quiet, the job writes
    # its heartbeat row, whose end the stream shows; everything before it is over. The commit cuts there, with
    # no wait bound (two minutes here) and no split, and the ack reaches the end of what was written.
    db, other = "heartbeat", "heartbeat_other"
    user, password = "heartbeat_writer", "heartbeat-secret"
    real_destination(db, setup=["CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                                SIGNAL_TABLE_DDL.format(table="canalbridge_signal")])
    mariadb.snapshot_user(user, password, db, "canalbridge_signal")
    mariadb.create_database(other)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)", database=other)
    writer = InMemoryWriter(f"{db}.t")
    commit = CommitSettings(interval_seconds=0.2, min_events=1, min_bytes=1, max_source_txn_wait_seconds=120)
    snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=user, password=password,
                                signal_table=f"{db}.canalbridge_signal", mode="never")
    settings = JobSettings(db, canal.canal_settings(db, poll_timeout_ms=50),
                           (ChannelSettings(f"{db}.t", f"lake.{db}.t"),), commit, snapshot=snapshot)
    job = SyncJob(settings, lambda channel: ChannelSink.of(writer),
                  snapshot=SnapshotSource(snapshot.connect, None))  # type: ignore[arg-type]  # (no chunk is read)
    job.start()
    try:
        ending_elsewhere(mariadb, db, other)
        end = EntryPosition(*mariadb.last_event_start("Xid"))
        assert job.acks.wait_through(end, 60), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()
    assert job.stats.split_source_txns == 0
    assert {int(key[0]) for key in writer.rows} == set(range(6))
    beats = mariadb.execute(f"SELECT kind FROM canalbridge_signal WHERE id = 'heartbeat:{db}'", database=db)
    assert beats == [("heartbeat",)]


SMALL_STORE = {"canal.instance.memory.buffer.size": "256", "canal.instance.transaction.size": "64"}


def test_a_transaction_larger_than_canals_store_goes_through_in_parts(real_destination, canal, mariadb):
    # Canal's store holds 256 entries or 256 KB (MEMSIZE mode), whichever fills first; its end never
    # arrives while the transaction's head is held, so the bridge must commit it in parts. The wait
    # bound is out of reach: only the store limit may cut the transaction.
    db = "bigtxn"
    real_destination(db, setup=["CREATE TABLE t (id INT PRIMARY KEY, body VARCHAR(200))"], properties=SMALL_STORE)
    writers: dict[str, InMemoryWriter] = {}

    def sink_for(channel: ChannelSettings) -> ChannelSink:
        writer = writers[channel.source] = InMemoryWriter(channel.source)
        return ChannelSink.of(writer)

    commit = CommitSettings(interval_seconds=0.5, min_events=100_000, min_bytes=1, max_source_txn_wait_seconds=3600,
                            store_capacity=256, store_transaction_size=64)
    settings = JobSettings("bigtxn", canal.canal_settings(db, batch_size=32, poll_timeout_ms=50),
                           (ChannelSettings(f"{db}.t", f"lake.{db}.t"),), commit)
    job = SyncJob(settings, sink_for)
    job.start()
    try:
        with mariadb.connection(db, autocommit=False) as conn, conn.cursor() as cursor:
            # More entries than the store has slots: 700 statements, each an annotated SQL entry and a row.
            for key in range(700):
                cursor.execute("INSERT INTO t VALUES (%s, %s)", (key, "x" * 150))
            conn.commit()
            # More bytes than the store holds: multi-row statements (executemany), rows events of about 8 KB.
            cursor.executemany("INSERT INTO t VALUES (%s, %s)", [(key, "y" * 200) for key in range(700, 4700)])
            conn.commit()
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert job.acks.wait_through(last, 120), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()
    assert job.stats.split_source_txns >= 2
    expected = dict(mariadb.execute("SELECT id, body FROM t", database=db))
    assert {int(key[0]): row["body"] for key, row in writers[f"{db}.t"].rows.items()} == expected


ISSUE_STORE = {"canal.instance.memory.buffer.size": "4096"}  # 4096 slots; 4 MB in MEMSIZE mode (1 KB units)
ACCTS = 50


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_every_snapshot_ever_current_on_main_holds_whole_transfers_with_a_small_store(real_destination, canal,
                                                                                     mariadb, spark, spark_settings):
    # Issue 33, hole 5: a 4 MB store and the default batch_size (8192 units, 8 MB a get in MEMSIZE mode).
    # No transfer comes near the store's size, so none may be split: every snapshot that was ever main's
    # (`.history`, not `.snapshots`, which lists the staging branch's too) sums to the same total.
    db = "transfers_small_store"
    real_destination(db, setup=["CREATE TABLE acct (id INT PRIMARY KEY, balance DECIMAL(12,2) NOT NULL)"],
                     properties=ISSUE_STORE)
    commit = CommitSettings(interval_seconds=0.5, min_events=1, min_bytes=1, store_capacity=4096)
    settings = JobSettings(db, canal.canal_settings(db, poll_timeout_ms=50),
                           (ChannelSettings(f"{db}.acct", f"lake.{db}.acct"),), commit)
    assert settings.source.batch_size == 8192 and settings.source.fetch_size(settings.commit) == 1024
    job = SyncJob(settings, lambda channel: make_sink(spark, channel, db, spark_settings))
    job.start()
    rng = random.Random(11)
    try:
        with mariadb.connection(db, autocommit=False) as conn, conn.cursor() as cursor:
            cursor.executemany("INSERT INTO acct VALUES (%s, 1000.00)", [(i,) for i in range(ACCTS)])
            conn.commit()
            for _ in range(6000):  # small money transfers: a debit and its credit
                amount = f"{rng.randint(1, 5000) / 100:.2f}"
                cursor.execute("UPDATE acct SET balance = balance - %s WHERE id = %s", (amount, rng.randrange(ACCTS)))
                cursor.execute("UPDATE acct SET balance = balance + %s WHERE id = %s", (amount, rng.randrange(ACCTS)))
                conn.commit()
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert job.acks.wait_through(last, 600), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()
    assert job.stats.split_source_txns == 0
    table = quote_table(f"lake.{db}.acct")
    ever_main = [row["snapshot_id"] for row in spark.sql(f"SELECT snapshot_id FROM {table}.history").collect()]
    assert len(ever_main) > 5, ever_main
    for snapshot in ever_main:
        total = spark.sql(f"SELECT count(*) AS n, sum(balance) AS total FROM {table} VERSION AS OF {snapshot}").first()
        assert (total["n"], str(total["total"])) in ((0, "None"), (ACCTS, f"{ACCTS * 1000}.00")), \
            f"snapshot {snapshot} holds half a transfer: {total}"
    expected = {key: str(balance) for key, balance in mariadb.execute("SELECT id, balance FROM acct", database=db)}
    rows = spark.table(table).collect()
    assert {row["id"]: str(row["balance"]) for row in rows} == expected
