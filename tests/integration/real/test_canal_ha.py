"""Canal's HA mode: two real Canal servers behind a ZooKeeper server, one running the destination and one standby,
their cursors in ZooKeeper (Canal's default-instance.xml), and a job that finds the running server there.

The running server is SIGKILLed mid-stream three times, in both directions: the job follows each failover to the
server ZooKeeper names next, and the killed server, started again, waits as standby and is not read. ZooKeeper
itself goes away for a while: the job streams on, a new connection waits for it, and the job goes on once it is
back. A second client with the job's client id is refused while the job holds its registration. At the end the
upsert target equals MariaDB cell by cell, and the changelog target holds every change once, binlog position by
position, the changes being what a second destination over the same binlog delivers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from canalbridge.canal.cluster import CanalCluster, CanalClusterError
from canalbridge.devkit.catalog import ACCOUNTS_COLUMNS, ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from spark_sink.sink import make_sink
from tests.helpers import eventually
from tests.infra.canal_server import PARSER_READY, CanalDestination, CanalServer
from tests.infra.processes import read_from
from tests.infra.sql_source import Source, create_sql
from tests.infra.zookeeper import ZooKeeperServer
from tests.integration.faults.checks import assert_changelog_once
from tests.integration.real.daemon_run import assert_target_equals_source
from tests.integration.real.entries import fetch_until

pytestmark = [pytest.mark.real, pytest.mark.spark, pytest.mark.faults]

DB = "ha"
ORDERS = TableDef(DB, "orders", ORDERS_COLUMNS)
ACCOUNTS = TableDef(DB, "accounts", ACCOUNTS_COLUMNS)  # the changelog channel
PASSWORD = "ha-client-secret"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pair(zookeeper, mariadb, canal, tmp_path_factory) -> Iterator[tuple[CanalServer, CanalServer]]:
    """Two Canal servers of one HA cluster reading database ``ha``; the first runs it, the second waits."""
    mariadb.create_database(DB)
    mariadb.execute(create_sql(ORDERS), create_sql(ACCOUNTS), database=DB)
    # A second reader of the same binlog from the same start: the changes the changelog must hold.
    canal.add_destination(CanalDestination(f"{DB}_check", filter_regex=rf"{DB}\..*"))
    destination = [CanalDestination(DB, filter_regex=rf"{DB}\..*")]
    first = CanalServer(tmp_path_factory.mktemp("canal-ha-1"), mariadb, destination, password=PASSWORD,
                        zookeeper=zookeeper.address, heap_max="384m").start()
    assert eventually(lambda: running(zookeeper) == first.port, 60), "the first server does not run the destination"
    second = CanalServer(tmp_path_factory.mktemp("canal-ha-2"), mariadb, destination, password=PASSWORD,
                         zookeeper=zookeeper.address, heap_max="384m", pinned=first.pinned).start()
    yield first, second
    for server in (first, second):
        server.stop()


def running(zookeeper: ZooKeeperServer) -> int | None:
    """The port of the server that runs the destination, as its running node in ZooKeeper says (None: none)."""
    zk = KazooClient(hosts=zookeeper.address, timeout=5)
    zk.start(timeout=10)
    try:
        if not zk.exists(f"/otter/canal/destinations/{DB}/running"):
            return None
        data, _ = zk.get(f"/otter/canal/destinations/{DB}/running")
        return int(json.loads(data)["address"].rpartition(":")[2])
    finally:
        zk.stop()
        zk.close()


def registered(zookeeper: ZooKeeperServer) -> bool:
    """Whether the job's client is registered as Canal's clients register (what canal-admin shows)."""
    zk = KazooClient(hosts=zookeeper.address, timeout=5)
    zk.start(timeout=10)
    try:
        return zk.exists(f"/otter/canal/destinations/{DB}/1001/running") is not None
    finally:
        zk.stop()
        zk.close()


def transaction(source: Source) -> None:
    """One transaction over both tables: an update and inserts in each, a delete and re-insert in the changelog's."""
    for table in (ORDERS, ACCOUNTS):
        key = source.rng.choice(source.keys(table))
        source.update(table, key, source.row(table, key))
        source.insert(table, [source.row(table) for _ in range(source.rng.randint(1, 3))])
    gone = source.rng.choice(source.keys(ACCOUNTS))
    source.sql("DELETE FROM accounts WHERE tenant = %s AND id = %s", *gone)
    source.insert(ACCOUNTS, [source.row(ACCOUNTS, gone)])
    source.commit()


def written(source: Source, mariadb, count: int) -> EntryPosition:
    """``count`` transactions written; the last one's position."""
    for _ in range(count):
        transaction(source)
    return EntryPosition(*mariadb.last_event_start("Xid"))


@pytest.mark.timeout(900)
def test_the_job_follows_every_failover_of_the_running_server_and_rides_out_zookeeper_going_away(
        pair, zookeeper, mariadb, canal, spark, spark_settings):
    servers = {server.port: server for server in pair}
    source = Source(mariadb, DB, (ORDERS, ACCOUNTS), seed=63)
    for table in (ORDERS, ACCOUNTS):
        source.insert(table, [source.row(table) for _ in range(20)])
    source.commit()
    # Attempts enough for a failover: the dead server's session expires (at most 4 s), then Canal waits 5 s.
    commit = CommitSettings(interval_seconds=0.3, min_events=1, min_bytes=1, reconnect_attempts=40,
                            retry_initial_seconds=0.2, retry_max_seconds=1.0)
    settings = JobSettings(DB, pair[0].canal_settings(DB, poll_timeout_ms=50, batch_size=64),
                           (ChannelSettings(ORDERS.qualified, f"lake.{DB}.orders"),
                            ChannelSettings(ACCOUNTS.qualified, f"lake.{DB}.accounts", mode="changelog")), commit)
    job = SyncJob(settings, lambda channel: make_sink(spark, channel, DB, spark_settings))
    job.start()
    try:
        last = written(source, mariadb, 5)
        assert job.acks.wait_through(last, 120), f"{job.state} {job.fail_message}"
        assert registered(zookeeper)
        for _ in range(3):  # the first server, the second, the first again
            victim = servers[running(zookeeper)]
            written(source, mariadb, 5)
            victim.kill()
            last = written(source, mariadb, 10)  # while the other takes over
            assert job.acks.wait_through(last, 180), f"{job.state} {job.fail_message} {job.stats}"
            assert running(zookeeper) not in (None, victim.port)
            offset = victim.log_file.stat().st_size
            victim.start()  # back, as standby
            last = written(source, mariadb, 5)
            assert job.acks.wait_through(last, 120), f"{job.state} {job.fail_message}"
            assert PARSER_READY not in read_from(victim.log_file, offset), "the standby runs the destination"
            assert job.state is JobState.RUNNING, job.fail_message

        zookeeper.stop()  # the stream needs no ZooKeeper while the running server lives
        last = written(source, mariadb, 5)
        assert job.acks.wait_through(last, 120), f"{job.state} {job.fail_message}"
        job.pause()
        job.resume()  # a new connection asks ZooKeeper, which is away: the job waits for it
        written(source, mariadb, 5)
        zookeeper.start()
        last = written(source, mariadb, 5)
        assert job.acks.wait_through(last, 180), f"{job.state} {job.fail_message}"
        assert eventually(lambda: registered(zookeeper), 60), "the job's client is registered again"
        assert job.state is JobState.RUNNING, job.fail_message
        # One client at a time reads the destination as client 1001, as Canal's Java clients do.
        other = CanalCluster(zookeeper.address, DB, "1001", timeout_s=5)
        try:
            with pytest.raises(CanalClusterError, match="registered by another session"):
                other.running_server()
        finally:
            other.close()
    finally:
        job.shutdown()

    assert_target_equals_source(spark, source, ORDERS, f"lake.{DB}.orders")
    with canal.connector(f"{DB}_check") as connector:
        connector.subscribe()
        entries = fetch_until(connector, lambda got: bool(got) and EntryPosition.of(got[-1]) >= last, 120)
    assert_changelog_once(spark, entries, ACCOUNTS.qualified, f"lake.{DB}.accounts")
