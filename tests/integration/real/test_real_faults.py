"""Faults with real parts: the daemon SIGKILLed, Canal stopped and killed, MariaDB restarted, mid-run.

Each fault but MariaDB's restart lands while SQL is being written and the daemon
is working; MariaDB restarts once the daemon has caught up (see step 3). At
the end the upsert target equals MariaDB cell by cell, and the changelog
target holds every change of its table exactly once, the changes being
what a second Canal destination over the same binlog delivers.
"""

from __future__ import annotations

import random
import signal
import threading

import pytest

from canalbridge.devkit.catalog import ACCOUNTS_COLUMNS, ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from canalbridge.sync.model.position import EntryPosition
from tests.daemon_process import daemon_log, job_status, running_daemon, stop
from tests.helpers import eventually
from tests.infra.canal_server import CanalDestination
from tests.infra.sql_source import PacedWriter, Source, create_sql
from tests.integration.faults.checks import assert_changelog_once, changelog_config
from tests.integration.real.daemon_run import acked_through, assert_target_equals_source, write_daemon_config
from tests.integration.real.entries import fetch_until

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.faults]

DB = "faults"
ORDERS = TableDef(DB, "orders", ORDERS_COLUMNS)
ACCOUNTS = TableDef(DB, "accounts", ACCOUNTS_COLUMNS)  # the changelog channel
KILLS = 3  # early, right after a commit, early: the many-kill run is the dev server's (test_daemon_faults)


def transaction(source: Source) -> None:
    """One transaction over both tables: updates, inserts, a key change, a delete and re-insert."""
    for table in (ORDERS, ACCOUNTS):
        key = source.rng.choice(source.keys(table))
        source.update(table, key, source.row(table, key))
        source.insert(table, [source.row(table) for _ in range(source.rng.randint(1, 3))])
    old = source.rng.choice(source.keys(ORDERS))
    source.sql("UPDATE orders SET id = %s WHERE id = %s", source.new_key(ORDERS)[0], old[0])
    gone = source.rng.choice(source.keys(ACCOUNTS))
    source.sql("DELETE FROM accounts WHERE tenant = %s AND id = %s", *gone)
    source.insert(ACCOUNTS, [source.row(ACCOUNTS, gone)])
    source.commit()



@pytest.mark.timeout(1200)
def test_kills_and_restarts_of_every_part_end_exact_and_once(real_destination, canal, mariadb, spark,
                                                             spark_settings, tmp_path):
    real_destination(DB, setup=[create_sql(ORDERS), create_sql(ACCOUNTS)])
    # A second reader of the same binlog from the same start: the changes the changelog must hold.
    canal.add_destination(CanalDestination(f"{DB}_check", filter_regex=rf"{DB}\..*"))
    channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.real_{DB}.{t.name}"'
                         for t in (ORDERS, ACCOUNTS))
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, spark_settings.warehouse, channels)
    changelog_config(config, "accounts")
    source = Source(mariadb, DB, (ORDERS, ACCOUNTS), seed=31)
    source.insert(ORDERS, [source.row(ORDERS) for _ in range(40)])
    source.insert(ACCOUNTS, [source.row(ACCOUNTS) for _ in range(40)])
    source.commit()
    moments = random.Random(5)
    pause = threading.Event()  # never set: its waits are the random fault moments, not synchronisation

    def ack_position() -> EntryPosition | None:
        status = job_status(config, "real")
        return EntryPosition.from_dict(status["ack_position"]) if status and status["ack_position"] else None

    def ack_moved(before: EntryPosition | None) -> bool:
        moved = ack_position()
        return moved is not None and moved != before

    def commit_acked(daemon) -> None:
        """Wait until this daemon process acks a commit of its own (then it is connected and working)."""
        assert eventually(lambda: daemon.poll() is not None or job_status(config, "real") is not None, 300)
        before = ack_position()
        assert eventually(lambda: daemon.poll() is not None or ack_moved(before), 300), daemon_log(config)[-3000:]
        assert daemon.poll() is None, daemon_log(config)[-3000:]

    # 1. The daemon SIGKILLed at random moments while SQL is written: early in its life
    # (start-up, the first gets and MERGEs), or right after one of its commits was acked.
    writer = PacedWriter(source, transaction)
    acked_before_kill = []
    for kill in range(KILLS):
        with running_daemon(config) as daemon:
            if kill % 2:
                commit_acked(daemon)
                pause.wait(moments.uniform(0.0, 1.5))
            else:
                pause.wait(moments.uniform(2.0, 10.0))
            assert daemon.poll() is None, daemon_log(config)[-3000:]
            acked_before_kill.append(ack_position())
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(60)

    with running_daemon(config) as daemon:
        # 2. Canal stopped cleanly and restarted, then killed and restarted, each right after
        # the daemon committed (connected, SQL being written).
        for fault in ("restart", "kill"):
            commit_acked(daemon)
            if fault == "restart":
                canal.restart()
            else:
                canal.kill()
                canal.start()
        writer.finish()
        # 3. MariaDB restarted under Canal and the daemon, once the daemon has caught up; then
        # more SQL. Caught up first: MySQL's connection breaking while Canal's parser is still
        # behind the binlog's end can lose a rows event inside Canal, which no client can see
        # (docs/guide/limits.md#what-remains; seen here once: a batch held 69 of its binlog range's 70 entries).
        caught_up = EntryPosition(*mariadb.last_event_start("Xid"))
        assert eventually(lambda: daemon.poll() is not None or acked_through(config, caught_up), 300), (
            f"not acked through {caught_up}: {job_status(config, 'real')}")
        mariadb.restart()
        source.reconnect()
        for _ in range(40):
            transaction(source)
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 300), (
            f"not acked through {last}: {job_status(config, 'real')}")
        assert daemon.poll() is None, daemon_log(config)[-3000:]
        stop(daemon, config)

    assert len(set(acked_before_kill)) > 1  # the kills landed while the daemon made progress
    assert_target_equals_source(spark, source, ORDERS, f"lake.real_{DB}.orders")
    with canal.connector(f"{DB}_check") as connector:
        connector.subscribe()
        entries = fetch_until(connector, lambda got: bool(got) and EntryPosition.of(got[-1]) >= last, 120)
    assert_changelog_once(spark, entries, f"{DB}.accounts", f"lake.real_{DB}.accounts")
