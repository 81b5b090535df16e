"""MariaDB -> real Canal in Kafka mode -> a real Kafka broker -> the daemon (or a job) -> the targets.

- Protobuf records on one partition, through faults: the daemon SIGKILLed at
  random moments while SQL is written, the broker stopped and started under
  it, the group's offsets lost; the upsert target equals MariaDB and the
  changelog target holds every change once.
- Flat messages over 3 partitions hashed by primary key: equal to MariaDB.
- Transactions stay whole on one partition of protobuf records: every cut
  keeps the total of two tables.
"""

from __future__ import annotations

import random
import signal
import threading
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from canalbridge.canal.kafka_records import RecordFormat, decode_record
from canalbridge.devkit.catalog import ACCOUNTS_COLUMNS, ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.model.position import KafkaPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.kafka.settings import KafkaSettings
from tests.daemon_process import cli, daemon_log, daemon_sections, job_status, metrics_text, running_daemon, stop
from tests.helpers import eventually
from tests.infra.kafka_broker import KafkaBroker
from tests.infra.mariadb import MariaDBServer
from tests.infra.sql_source import PacedWriter, Source, create_sql
from tests.integration.faults.checks import assert_changelog_once, changelog_config
from tests.integration.real.daemon_run import assert_target_equals_source
from tests.integration.real.test_real_faults import transaction
from tests.integration.real.test_transactions_whole import TABLES as TRANSFER_TABLES
from tests.integration.real.test_transactions_whole import TOTAL, SnapshottingWriter, amounts_at, transfer_workload

pytestmark = [pytest.mark.real, pytest.mark.kafka]

MARKER = "marker"  # a table whose row, written last, shows when Canal has published everything before it
KILLS = 3  # early, right after a commit, early: the many-kill run is the dev server's (test_daemon_faults)


def create(mariadb: MariaDBServer, database: str, tables: tuple[TableDef, ...]) -> None:
    mariadb.create_database(database)
    mariadb.execute(*[create_sql(table) for table in tables], f"CREATE TABLE {MARKER} (id INT PRIMARY KEY)",
                    database=database)


def published_ends(broker: KafkaBroker, topic: str, partitions: int, source: Source, record_format: RecordFormat,
                   marker: int) -> dict[int, int]:
    """Write marker row ``marker``; once Canal published it, every partition's end offset.

    Canal sends a batch only after the one before it is written to every
    partition, so everything written before the marker is in the topic then.
    """
    source.sql(f"INSERT INTO {MARKER} VALUES (%s)", marker)
    source.commit()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning()
        for _ in range(120):
            for _tp, records in consumer.poll(timeout_ms=1000).items():
                for record in records:
                    for entry in decode_record(record.value, record_format).entries:
                        if entry.header.tableName == MARKER and entry.header.eventType == entry_pb.EventType.INSERT:
                            return {tp.partition: end for tp, end in consumer.end_offsets(assigned).items()}
        raise AssertionError(f"Canal did not publish marker {marker} into {topic}")
    finally:
        consumer.close()


def committed_through(config: Path, ends: dict[int, int]) -> bool:
    status = job_status(config, "real")
    if status is None:
        return False
    committed = {p["partition"]: p["committed_offset"] or 0 for p in status["partitions"]}
    return all(committed.get(partition, 0) >= end for partition, end in ends.items())


def kafka_config(path: Path, broker: KafkaBroker, topic: str, record_format: str, warehouse: str,
                 tables: tuple[TableDef, ...], database: str, *, markers: bool) -> Path:
    channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.kafka_{database}.{t.name}"'
                         for t in tables)
    path.write_text(daemon_sections(warehouse) + f"""
[[job]]
name = "real"
[job.kafka]
bootstrap_servers = "{broker.bootstrap}"
topic = "{topic}"
format = "{record_format}"
transaction_markers = {str(markers).lower()}
poll_timeout_ms = 200
request_timeout_ms = 3000
[job.commit]
interval_seconds = 1
min_events = 500
min_bytes = 1
retry_initial_seconds = 0.1
retry_max_seconds = 1.0
reconnect_attempts = 60
{channels}
""")
    return path


def set_group_offsets(broker: KafkaBroker, topic: str, group: str, offsets: dict[int, int]) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


@pytest.mark.spark
@pytest.mark.faults
@pytest.mark.timeout(1200)
def test_protobuf_records_through_kills_a_broker_restart_and_lost_offsets_end_exact_and_once(
        kafka_canal, kafka_broker, mariadb, spark, spark_settings, tmp_path):
    db = "kfaults"
    orders, accounts = TableDef(db, "orders", ORDERS_COLUMNS), TableDef(db, "accounts", ACCOUNTS_COLUMNS)
    create(mariadb, db, (orders, accounts))
    kafka_canal(db, flat=False)
    config = kafka_config(tmp_path / "canalbridge.toml", kafka_broker, db, "protobuf", spark_settings.warehouse,
                          (orders, accounts), db, markers=True)
    changelog_config(config, "accounts")
    source = Source(mariadb, db, (orders, accounts), seed=41)
    source.insert(orders, [source.row(orders) for _ in range(40)])
    source.insert(accounts, [source.row(accounts) for _ in range(40)])
    source.commit()
    moments = random.Random(6)
    pause = threading.Event()  # never set: its waits are the random fault moments, not synchronisation

    def committed_offset() -> int:
        status = job_status(config, "real")
        return (status["partitions"][0]["committed_offset"] or 0) if status and status["partitions"] else 0

    def progress(daemon) -> None:
        """Wait until this daemon process commits an offset of its own (it is connected and working)."""
        assert eventually(lambda: daemon.poll() is not None or job_status(config, "real") is not None, 300)
        before = committed_offset()
        assert eventually(lambda: daemon.poll() is not None or committed_offset() > before, 300), \
            daemon_log(config)[-3000:]

    # 1. The daemon SIGKILLed at random moments while SQL is written.
    writer = PacedWriter(source, transaction)
    seen = []
    for kill in range(KILLS):
        with running_daemon(config) as daemon:
            if kill % 2:  # right after one of its commits; else early in its life
                progress(daemon)
            pause.wait(moments.uniform(0.0, 3.0) if kill % 2 else moments.uniform(2.0, 10.0))
            assert daemon.poll() is None, daemon_log(config)[-3000:]
            seen.append(committed_offset())
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(60)
    with running_daemon(config) as daemon:
        # 2. The broker stopped and started under the daemon (and under Canal) while SQL is written.
        progress(daemon)
        kafka_broker.stop()
        kafka_broker.start()
        writer.finish()
        ends = published_ends(kafka_broker, db, 1, source, RecordFormat.PROTOBUF, 1)
        assert eventually(lambda: daemon.poll() is not None or committed_through(config, ends), 300), (
            f"not committed through {ends}: {job_status(config, 'real')}")
        stop(daemon, config)
    # 3. The group's offsets lost: the targets' snapshots say where to resume.
    set_group_offsets(kafka_broker, db, "canalbridge-real", {0: 0})
    for _ in range(20):
        transaction(source)
    with running_daemon(config) as daemon:
        ends = published_ends(kafka_broker, db, 1, source, RecordFormat.PROTOBUF, 2)
        assert eventually(lambda: daemon.poll() is not None or committed_through(config, ends), 300), (
            f"not committed through {ends}: {job_status(config, 'real')}")
        status = job_status(config, "real")
        assert status["partitions"][0]["binlog_position"] and status["partitions"][0]["execute_time"]
        log = stop(daemon, config)

    assert len(set(seen)) > 1  # the kills landed while the daemon made progress
    assert '"event": "kafka.connected"' in log or "kafka.connected" in log
    assert_target_equals_source(spark, source, orders, f"lake.kafka_{db}.orders")
    # Every change once: the topic's own entries, each binlog position counted once (Canal's copies).
    entries = topic_entries(kafka_broker, db, 1, RecordFormat.PROTOBUF)
    assert_changelog_once(spark, entries, f"{db}.accounts", f"lake.kafka_{db}.accounts")


def topic_entries(broker: KafkaBroker, topic: str, partitions: int, record_format: RecordFormat) -> list:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(assigned)
        entries = []
        while any(consumer.position(tp) < ends[tp] for tp in assigned):
            for _tp, records in consumer.poll(timeout_ms=1000).items():
                for record in records:
                    entries.extend(decode_record(record.value, record_format).entries)
        return entries
    finally:
        consumer.close()


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_flat_messages_hashed_over_three_partitions_land_equal_to_mariadb(kafka_canal, kafka_broker, mariadb, spark,
                                                                          spark_settings, tmp_path):
    db = "khashedflat"  # (also its topic's name: topics are per broker, the run's)
    orders, accounts = TableDef(db, "orders", ORDERS_COLUMNS), TableDef(db, "accounts", ACCOUNTS_COLUMNS)
    create(mariadb, db, (orders, accounts))
    kafka_canal(db, flat=True, partitions=3, hash_rule=rf"{db}\.orders:id,{db}\.accounts:tenant^id")
    config = kafka_config(tmp_path / "canalbridge.toml", kafka_broker, db, "flat", spark_settings.warehouse,
                          (orders, accounts), db, markers=False)
    source = Source(mariadb, db, (orders, accounts), seed=42)
    with running_daemon(config) as daemon:
        for round_ in range(30):  # inserts, updates and deletes; no key changes (docs/guide/kafka.md#hashed-partitions)
            source.insert(orders, [source.row(orders) for _ in range(5)])
            source.insert(accounts, [source.row(accounts) for _ in range(3)])
            for table in (orders, accounts):
                key = source.rng.choice(source.keys(table))
                source.update(table, key, source.row(table, key))
            if round_ % 3 == 0:
                gone = source.rng.choice(source.keys(orders))
                source.sql("DELETE FROM orders WHERE id = %s", gone[0])
            source.commit()
        ends = published_ends(kafka_broker, db, 3, source, RecordFormat.FLAT, 1)
        assert eventually(lambda: daemon.poll() is not None or committed_through(config, ends), 300), (
            f"not committed through {ends}: {job_status(config, 'real')}")
        status = job_status(config, "real")
        assert status["source_transactions"].startswith("not kept whole: flat messages")
        assert len(status["partitions"]) == 3 and all(p["lag"] == 0 for p in status["partitions"])
        metrics = metrics_text(config)
        for partition in range(3):
            assert f'canalbridge_kafka_lag_messages{{partition="{partition}",sync_job="real"}} 0.0' in metrics
            assert f'canalbridge_kafka_committed_offset{{partition="{partition}",sync_job="real"}} ' \
                   f'{float(ends[partition])}' in metrics
        text = cli("status", "-c", str(config)).stdout
        assert "partition 2: committed offset" in text and "source transactions: not kept whole" in text
        stop(daemon, config)
    for table in (orders, accounts):
        assert_target_equals_source(spark, source, table, f"lake.kafka_{db}.{table.name}")


def test_transactions_stay_whole_on_one_partition_of_protobuf_records(kafka_canal, kafka_broker, mariadb):
    db = "ktransfers"
    mariadb.create_database(db)
    mariadb.execute(*[f"CREATE TABLE {t} (id INT PRIMARY KEY, amount BIGINT NOT NULL)" for t in TRANSFER_TABLES],
                    database=db)
    # Small batches (1 KB in Canal's MEMSIZE mode): many records, most ending inside a transaction.
    kafka_canal(db, flat=False, server_properties={"canal.mq.canalBatchSize": "1"})
    writers: dict[str, SnapshottingWriter] = {}

    def sink_for(channel: ChannelSettings) -> ChannelSink:
        writer = writers[channel.source] = SnapshottingWriter(channel.source)
        return ChannelSink.of(writer)

    # Synchronous, eager commits: a cut at nearly every transaction end.
    commit = CommitSettings(interval_seconds=0.05, min_events=1, min_bytes=1, max_source_txn_wait_seconds=120,
                            overlap=False)
    kafka = KafkaSettings((kafka_broker.bootstrap,), db, f"group-{db}", record_format="protobuf",
                          transaction_markers=True, poll_timeout_ms=50, max_poll_records=1)
    settings = JobSettings("transfers", kafka, tuple(ChannelSettings(f"{db}.{t}", f"lake.{db}.{t}")
                                                     for t in TRANSFER_TABLES), commit)
    job = SyncJob(settings, sink_for)
    job.start()
    try:
        transfer_workload(mariadb, random.Random(8), transactions=120, database=db)
        expected = {t: dict(mariadb.execute(f"SELECT id, amount FROM {t}", database=db)) for t in TRANSFER_TABLES}

        def caught_up() -> bool:
            return all(amounts_at(writers[f"{db}.{t}"], _last(writers)) == {str(k): v for k, v in
                                                                            expected[t].items()}
                       for t in TRANSFER_TABLES)

        assert job.acks.wait_until(caught_up, 120), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()
    assert job.stats.split_source_txns == 0
    cuts = [position for writer in writers.values() for position, _ in writer.snapshots]
    assert len(cuts) > 20, len(cuts)
    for cut in cuts:
        tables = [amounts_at(writers[f"{db}.{t}"], cut) for t in TRANSFER_TABLES]
        if any(tables):
            assert sum(sum(t.values()) for t in tables) == TOTAL, f"half a transaction committed through {cut}"


def _last(writers: dict[str, SnapshottingWriter]) -> KafkaPosition:
    """The furthest cut any writer committed (Kafka positions of one partition compare)."""
    cuts = [position for writer in writers.values() for position, _ in writer.snapshots]
    return max(cuts) if cuts else KafkaPosition("", -1, lane="none")
