"""Atomic cuts on Nessie (``[job.cuts] atomic``): through real Canal and MariaDB, every commit moves both tables
of a transfer in one Nessie commit, through a daemon SIGKILL that lands while a commit is staged.

MariaDB moves money between accounts (two UPDATEs of ``acct``) and records each transfer in ``ledger`` (an
INSERT), in one transaction. A reader thread reads both tables at Nessie's newest commit, over and over, while
the daemon runs and is killed with one table's share of a commit staged and the other's not; afterwards, every
commit Nessie's main went through is read again. The balances
are always exactly those after the transfers the ledger holds: no state of main ever split a transfer.
"""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

from canalbridge.sync.model.position import EntryPosition
from tests.daemon_process import daemon_log, job_status, running_daemon, stop
from tests.helpers import eventually
from tests.infra.nessie import NessieServer
from tests.infra.s3proxy import CLIENT_ENV, S3ProxyServer, store_client_in
from tests.infra.sql_source import PacedWriter, Source, create_sql
from tests.integration.real.daemon_run import (
    acked_through,
    assert_target_equals_source,
    spark_section,
    write_daemon_config,
)
from tests.integration.real.test_cuts_across_tables import ACCOUNTS, ACCT, DB, LEDGER, START, Transfers, agree

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.faults]

CATALOG = "atomiclake"
SECRET_VARIABLE = "ATOMICLAKE_S3_SECRET"


def target(table) -> str:  # type: ignore[no-untyped-def]
    return f"{CATALOG}.{DB}.{table.name}"


def catalog_keys(nessie: NessieServer, name: str, prefix: str | None = None) -> dict[str, str]:
    """A Spark catalog ``name`` on Nessie (at the reference ``prefix``, e.g. ``main@<hash>``; None: main)."""
    keys = {"": "org.apache.iceberg.spark.SparkCatalog", ".type": "rest", ".uri": nessie.uri,
            ".s3.access-key-id": nessie.store.access_key, ".s3.secret-access-key": nessie.store.secret_key,
            **({".prefix": prefix, ".cache-enabled": "false"} if prefix else {})}
    return {f"spark.sql.catalog.{name}{key}": value for key, value in keys.items()}


def staged_labels(config) -> list[str]:  # type: ignore[no-untyped-def]
    """The label of each ``channel.staged`` line the daemon logged (one per channel and commit), in order."""
    return [json.loads(line)["label"] for line in daemon_log(config).splitlines() if '"channel.staged"' in line]


def kill_between_stage_and_publish(daemon, config) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL the daemon once one table's share of a commit is staged and the other's is not: the commit is then
    not published. Each channel logs its ``channel.staged`` before it hands its write over, and the publish
    waits for both: stopped (SIGSTOP) with one of a commit's two lines logged, the daemon has not published
    it. A commit caught later than that is let go on (SIGCONT), and the next one tried."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        seen = len(staged_labels(config))
        assert eventually(lambda: daemon.poll() is not None or len(staged_labels(config)) > seen, 60), (  # noqa: B023
            daemon_log(config)[-3000:])
        assert daemon.poll() is None, daemon_log(config)[-3000:]
        daemon.send_signal(signal.SIGSTOP)
        labels = staged_labels(config)
        if labels.count(labels[-1]) == 1:
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(60)
            return
        daemon.send_signal(signal.SIGCONT)
    raise AssertionError("no commit was caught with one table staged and the other not")


class PinnedReads:
    """Reads both tables at one Nessie commit, through a catalog of the session pinned to it."""

    def __init__(self, spark, nessie: NessieServer) -> None:  # type: ignore[no-untyped-def]
        self._spark = spark
        self._nessie = nessie

    def held_together(self, commit: str) -> bool | None:
        """Whether the balances at Nessie's ``commit`` are exactly those after the transfers its ledger holds,
        or both tables are still empty as the daemon made them (None: a table was not made yet at that commit)."""
        name = f"pin_{commit[:16]}"
        for key, value in catalog_keys(self._nessie, name, f"main@{commit}").items():
            self._spark.conf.set(key, value)
        if not all(self._spark.catalog.tableExists(f"{name}.{DB}.{table.name}") for table in (ACCT, LEDGER)):
            return None
        acct = self._spark.sql(f"SELECT id, balance FROM {name}.{DB}.acct").collect()
        ledger = self._spark.sql(f"SELECT id, src, dst, amount FROM {name}.{DB}.ledger").collect()
        return (not acct and not ledger) or agree(acct, ledger)


class HeadReader:
    """A thread that reads both tables at Nessie's newest commit, until stopped: what it saw."""

    def __init__(self, reads: PinnedReads, nessie: NessieServer) -> None:
        self._reads = reads
        self._nessie = nessie
        self._done = threading.Event()
        self.read: list[tuple[str, bool]] = []  # (Nessie commit, whether the two tables agreed)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="head-reader")
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self._done.wait(0.3):  # the wait paces the reads; it synchronises nothing
                head = self._nessie.head()
                agreed = self._reads.held_together(head)
                if agreed is not None:
                    self.read.append((head, agreed))
        except BaseException as exc:  # (raised in the test's thread by finish)
            self.error = exc

    def finish(self) -> None:
        self._done.set()
        self.thread.join(120)
        assert not self.thread.is_alive(), "the head reader did not finish"
        if self.error is not None:
            raise self.error


@pytest.mark.timeout(900)
def test_every_commit_of_main_holds_whole_transfers_in_both_tables_through_a_kill_in_a_staged_commit(
        real_destination, canal, mariadb, spark, tmp_path, monkeypatch):
    real_destination(DB, setup=[create_sql(ACCT), create_sql(LEDGER)])
    with S3ProxyServer(tmp_path / "s3") as store, NessieServer(tmp_path / "nessie", store) as nessie:
        nessie.iceberg("POST", "namespaces", {"namespace": [DB]})
        # (the accounts' target partitioned: its equality deletes are staged under its unpartitioned spec)
        channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "{target(t)}"'
                             + ('\npartition_by = ["bucket(4, id)"]' if t is ACCT else "") for t in (ACCT, LEDGER))
        config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, "", channels,
                                     spark=spark_section(CATALOG, catalog_keys(nessie, CATALOG),
                                                         f"spark.sql.catalog.{CATALOG}.s3.secret-access-key",
                                                         SECRET_VARIABLE))
        config.write_text(config.read_text() + "[job.cuts]\natomic = true\n")
        for key, value in {**CLIENT_ENV, SECRET_VARIABLE: store.secret_key}.items():
            monkeypatch.setenv(key, value)  # (the daemon's environment: tests.daemon_process passes this one on)
        store_client_in(spark)
        for key, value in catalog_keys(nessie, CATALOG).items():
            spark.conf.set(key, value)
        spark.conf.set(f"spark.sql.catalog.{CATALOG}.cache-enabled", "false")

        source = Source(mariadb, DB, (ACCT, LEDGER), seed=19)
        source.insert(ACCT, [{"id": i, "balance": START} for i in range(ACCOUNTS)])
        source.commit()
        writer = PacedWriter(source, Transfers(), every_s=0.05)
        reads = PinnedReads(spark, nessie)
        reader = HeadReader(reads, nessie)
        try:
            with running_daemon(config) as daemon:
                assert eventually(lambda: daemon.poll() is not None
                                  or '"spark.published"' in daemon_log(config), 300), daemon_log(config)[-3000:]
                kill_between_stage_and_publish(daemon, config)
            with running_daemon(config) as daemon:
                published = daemon_log(config).count('"spark.published"')
                assert eventually(lambda: daemon.poll() is not None
                                  or daemon_log(config).count('"spark.published"') > published, 300), (
                    daemon_log(config)[-3000:])
                writer.finish()
                last = EntryPosition(*mariadb.last_event_start("Xid"))
                assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 300), (
                    f"not acked through {last}: {job_status(config, 'real')}")
                assert daemon.poll() is None, daemon_log(config)[-3000:]
                stop(daemon, config)
        finally:
            reader.finish()

        assert reader.read, "the reader read no commit"
        assert all(agreed for _, agreed in reader.read), [commit for commit, agreed in reader.read if not agreed]
        assert len({commit for commit, _ in reader.read}) >= 3, reader.read  # it read while main moved on
        assert_target_equals_source(spark, source, ACCT, target(ACCT))
        assert_target_equals_source(spark, source, LEDGER, target(LEDGER))
        # Every state main went through, read again: each Nessie commit moved both tables or neither.
        history = [entry["commitMeta"]["hash"] for entry in nessie.history(1000)]
        states = [reads.held_together(commit) for commit in history]
        assert states.count(True) >= 5 and all(state is not False for state in states), list(zip(history, states))
