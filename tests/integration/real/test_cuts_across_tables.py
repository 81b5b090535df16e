"""Reading several tables at one source cut, on a JDBC catalog, through daemon kills.

MariaDB moves money: each transaction takes an amount from one account and gives it to another (two UPDATEs of
``acct``) and records it in ``ledger`` (an INSERT). In every state the source held, each balance is the
starting amount less what the ledger says the account sent, plus what it received. A reader thread joins the
two tables at the newest cut the job's log names, over and over, while the daemon runs and is SIGKILLed
(in the middle of a commit, between two tables' tags, between the tags and the log's row: wherever the kill
lands); it never sees the invariant broken. The tables' mains, replayed from their history, went through
states where it is broken: what a reader of each table's current main can see.
"""

from __future__ import annotations

import random
import secrets
import signal
import threading
from pathlib import Path

import pytest

from canalbridge.devkit.entries import ColumnDef, TableDef
from canalbridge.sync.model.position import EntryPosition
from tests.daemon_process import daemon_log, job_status, running_daemon, stop
from tests.helpers import eventually
from tests.infra.sql_source import PacedWriter, Source, create_sql
from tests.integration.real.daemon_run import (
    acked_through,
    assert_target_equals_source,
    spark_section,
    write_daemon_config,
)

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.faults]

DB = "bank"
CATALOG = "cutlake"
CATALOG_DB = "cut_catalog"
ACCT = TableDef(DB, "acct", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("balance", "bigint(20)")))
LEDGER = TableDef(DB, "ledger", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("src", "int(11)"),
                                 ColumnDef.of("dst", "int(11)"), ColumnDef.of("amount", "bigint(20)")))
ACCOUNTS, START = 8, 1_000
KILLS = 1
KEEP = 3


def target(table: TableDef) -> str:
    return f"{CATALOG}.{DB}.{table.name}"


class Transfers:
    """One transfer per call, numbered in order: the ledger's ids are the transfers' order."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, source: Source) -> None:
        src, dst = source.rng.sample(range(ACCOUNTS), 2)
        amount = source.rng.randint(1, 50)
        self.count += 1
        source.sql("UPDATE acct SET balance = balance - %s WHERE id = %s", amount, src)
        source.sql("UPDATE acct SET balance = balance + %s WHERE id = %s", amount, dst)
        source.sql("INSERT INTO ledger VALUES (%s, %s, %s, %s)", self.count, src, dst, amount)
        source.commit()


def held_together(spark, acct_version: str, ledger_version: str) -> bool:
    """Whether the balances at ``acct_version`` are exactly those after the transfers the ledger holds at
    ``ledger_version`` (each a tag or a snapshot id): a state the source held."""
    return agree(spark.sql(f"SELECT id, balance FROM {target(ACCT)} VERSION AS OF {acct_version}").collect(),
                 spark.sql(f"SELECT id, src, dst, amount FROM {target(LEDGER)} VERSION AS OF {ledger_version}")
                 .collect())


def agree(acct: list, transfers: list) -> bool:
    """Whether the balances of the ``acct`` rows (id, balance) are exactly those after the ``transfers`` (rows
    of the ledger: id, src, dst, amount), numbered 1..n."""
    balances = {row["id"]: row["balance"] for row in acct}
    expected = dict.fromkeys(range(ACCOUNTS), START)
    for row in transfers:
        expected[row["src"]] -= row["amount"]
        expected[row["dst"]] += row["amount"]
    return sorted(row["id"] for row in transfers) == list(range(1, len(transfers) + 1)) and balances == expected


class CutReader:
    """A thread that reads both tables at the newest cut the log names, until stopped; what it saw."""

    def __init__(self, spark) -> None:
        self._spark = spark
        self._done = threading.Event()
        self.read: list[tuple[int, bool]] = []  # (seq, whether the two tables agreed)
        self.gone = 0  # reads whose tag went before the tables were read (older than `keep` cuts)
        self.error: BaseException | None = None  # what ended the thread otherwise
        self.thread = threading.Thread(target=self._run, name="cut-reader")
        self.thread.start()

    def _run(self) -> None:
        try:
            self._read()
        except BaseException as exc:  # (raised in the test's thread by finish)
            self.error = exc

    def _read(self) -> None:
        spark = self._spark
        while not self._done.wait(0.2):  # the wait paces the reads; it synchronises nothing
            if not spark.catalog.tableExists(f"{CATALOG}.canalbridge.cuts"):
                continue
            rows = spark.sql(f"SELECT seq, tag FROM {CATALOG}.canalbridge.cuts WHERE job = 'real' "
                             f"ORDER BY seq DESC LIMIT 1").collect()
            if not rows:
                continue
            tag = f"'{rows[0]['tag']}'"
            try:
                agreed = held_together(spark, tag, tag)
            except Exception as exc:
                if "Cannot find matching snapshot ID or reference name" not in str(exc):
                    raise
                # Only a tag the log no longer names as its newest may go.
                newest = spark.sql(f"SELECT max(seq) AS seq FROM {CATALOG}.canalbridge.cuts WHERE job = 'real'").first()
                assert newest["seq"] > rows[0]["seq"], f"{rows[0]['tag']}, the newest cut logged, has no tag"
                self.gone += 1
                continue
            self.read.append((rows[0]["seq"], agreed))

    def finish(self) -> None:
        self._done.set()
        self.thread.join(120)
        assert not self.thread.is_alive(), "the cut reader did not finish"
        if self.error is not None:
            raise self.error


def jdbc_catalog(history_db, warehouse: Path) -> tuple[str, str]:
    """A JDBC catalog in a database of ``history_db`` with a user of its own: the ``[spark]`` body for it, and
    the user's password (which the daemon reads from ``CUTLAKE_JDBC_PASSWORD``)."""
    password = secrets.token_hex(12)
    history_db.create_database(CATALOG_DB)
    history_db.execute("DROP USER IF EXISTS 'cuts'@'%'", f"CREATE USER 'cuts'@'%' IDENTIFIED BY '{password}'",
                       f"GRANT ALL ON `{CATALOG_DB}`.* TO 'cuts'@'%'")
    prefix = f"spark.sql.catalog.{CATALOG}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "jdbc",
            f"{prefix}.uri": f"jdbc:mariadb://{history_db.host}:{history_db.port}/{CATALOG_DB}",
            f"{prefix}.jdbc.user": "cuts", f"{prefix}.jdbc.schema-version": "V1",
            f"{prefix}.warehouse": warehouse.as_uri()}
    return spark_section(CATALOG, conf, f"{prefix}.jdbc.password", "CUTLAKE_JDBC_PASSWORD"), password


@pytest.mark.timeout(900)
def test_a_reader_at_the_logged_cut_never_sees_tables_disagree_while_their_mains_do(
        real_destination, canal, mariadb, history_db, spark, tmp_path, monkeypatch):
    real_destination(DB, setup=[create_sql(ACCT), create_sql(LEDGER)])
    section, password = jdbc_catalog(history_db, tmp_path / "warehouse")
    monkeypatch.setenv("CUTLAKE_JDBC_PASSWORD", password)  # the daemon's environment, as a service manager sets it
    channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "{target(t)}"' for t in (ACCT, LEDGER))
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, "", channels, spark=section)
    config.write_text(config.read_text() + f"[job.cuts]\ninterval_seconds = 1\nkeep = {KEEP}\n")
    # The test's own session reads the same catalog (its own copy of each table, never a cached one).
    prefix = f"spark.sql.catalog.{CATALOG}"
    for line in section.split("[spark.conf]\n")[1].split("[spark.conf_env]")[0].splitlines():
        key, value = (part.strip().strip('"') for part in line.split(" = ", 1))
        spark.conf.set(key, value)
    spark.conf.set(f"{prefix}.jdbc.password", password)
    spark.conf.set(f"{prefix}.cache-enabled", "false")

    source = Source(mariadb, DB, (ACCT, LEDGER), seed=11)
    source.insert(ACCT, [{"id": i, "balance": START} for i in range(ACCOUNTS)])
    source.commit()
    writer = PacedWriter(source, Transfers(), every_s=0.05)
    reader = CutReader(spark)
    moments = random.Random(3)
    pause = threading.Event()  # never set: its waits are the random kill moments, not synchronisation

    def cut_seq() -> int | None:
        status = job_status(config, "real")
        return status["cut"]["seq"] if status and status.get("cut") else None

    def logged_seq() -> int:
        """The newest cut the log holds, as a reader finds it."""
        if not spark.catalog.tableExists(f"{CATALOG}.canalbridge.cuts"):
            return 0
        return spark.sql(f"SELECT max(seq) AS seq FROM {CATALOG}.canalbridge.cuts").first()["seq"] or 0

    try:
        for _ in range(KILLS):
            logged = logged_seq()
            with running_daemon(config) as daemon:
                # Once this daemon logged a cut of its own (its tags and log work), at a random moment in the
                # cuts that follow.
                assert eventually(lambda: daemon.poll() is not None or (cut_seq() or 0) > logged, 300), (  # noqa: B023
                    daemon_log(config)[-3000:])
                pause.wait(moments.uniform(0.0, 2.0))
                assert daemon.poll() is None, daemon_log(config)[-3000:]
                daemon.send_signal(signal.SIGKILL)
                daemon.wait(60)
        with running_daemon(config) as daemon:
            # A cut of this daemon while the transfers go on: its tag commits drop the tags a kill left unlogged.
            # (Seqs are publish times in ms: a newer cut has a higher one.)
            logged = logged_seq()
            assert eventually(lambda: daemon.poll() is not None or (cut_seq() or 0) > logged, 300), (
                daemon_log(config)[-3000:])
            writer.finish()
            last = EntryPosition(*mariadb.last_event_start("Xid"))
            assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 300), (
                f"not acked through {last}: {job_status(config, 'real')}")

            def cut_at_end() -> bool:
                status = job_status(config, "real")
                cut = status and status.get("cut")
                return bool(cut) and cut["position"] == str(last)

            assert eventually(lambda: daemon.poll() is not None or cut_at_end(), 300), job_status(config, "real")
            assert daemon.poll() is None, daemon_log(config)[-3000:]
            stop(daemon, config)
    finally:
        reader.finish()

    assert reader.read, f"the reader read no cut ({reader.gone} tags gone before it read them)"
    assert all(agreed for _, agreed in reader.read), [seq for seq, agreed in reader.read if not agreed]
    assert len({seq for seq, _ in reader.read}) >= 3, reader.read  # it read while the cuts moved on
    assert_target_equals_source(spark, source, ACCT, target(ACCT))
    assert_target_equals_source(spark, source, LEDGER, target(LEDGER))
    rows = spark.sql(f"SELECT seq, tag FROM {CATALOG}.canalbridge.cuts WHERE job = 'real'").collect()
    assert len(rows) == KEEP
    for each in (ACCT, LEDGER):
        tags = {row["name"] for row in spark.sql(f"SELECT name FROM {target(each)}.refs WHERE type = 'TAG'").collect()}
        assert tags == {row["tag"] for row in rows}, f"{each.name}: only the tags of the cuts the log keeps"

    # Each table's main, between the two tables' commits of a cut, held balances and a ledger of different
    # transfers: a reader joining the mains as they move can see that.
    history = sorted([(row["made_current_at"], each.name, row["snapshot_id"])
                      for each in (ACCT, LEDGER)
                      for row in spark.sql(f"SELECT * FROM {target(each)}.history").collect()])
    current: dict[str, int] = {}
    torn = 0
    for index, (when, name, snapshot_id) in enumerate(history):
        current[name] = snapshot_id
        if len(current) < 2 or (index + 1 < len(history) and history[index + 1][0] == when):
            continue  # (two commits in the same millisecond: no reader saw either alone)
        torn += not held_together(spark, str(current["acct"]), str(current["ledger"]))
    assert torn > 0, "reading each table's current main shows states no source transaction left"
