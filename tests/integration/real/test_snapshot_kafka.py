"""A snapshot through Canal's Kafka topic meets the stream exactly, in both of Canal's record formats: the real
Canal publishes MariaDB's binlog into a real broker, the job reads the topic, and its signal rows travel in the
topic with the changes (flat messages carry no binlog position, so a position could not serve as a watermark).
While a workload changes the very tables being read, every target ends equal to ``SELECT *`` of its source; a
changelog target fed by protobuf records holds each change once."""

from __future__ import annotations

import pytest

from canalbridge.canal.kafka_records import RecordFormat
from canalbridge.source_db import SourceDb
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.source import SnapshotSource
from canalbridge.sync.source.kafka.settings import KafkaSettings
from spark_sink.chunk_read import JdbcSource, SparkChunkReader
from spark_sink.sink import make_sink
from tests.helpers import eventually
from tests.infra.sql_source import Source, mixed_setup, mixed_tables, mixed_workload
from tests.integration.real.daemon_run import assert_target_equals_source
from tests.integration.real.test_real_kafka import MARKER, published_ends
from tests.integration.real.test_snapshot import assert_changelog_once, folded

pytestmark = [pytest.mark.real, pytest.mark.kafka, pytest.mark.spark]

SIGNALS = "canalbridge_signal"
PASSWORD = "kafka-snapshot-secret"
ROWS_BEFORE = 90  # per table, written before Canal starts: only the snapshot brings them
CHANGELOG = "accounts"  # into a changelog target where the records tell copies (protobuf)


@pytest.mark.timeout(900)
def test_a_snapshot_through_protobuf_records_and_flat_messages_leaves_every_target_equal_to_its_source(
        kafka_canal, kafka_broker, mariadb, spark, spark_settings):
    runs = []
    for record_format in RecordFormat:
        db = f"ksnap_{record_format.value}"  # (also its topic's name)
        tables = mixed_tables(db)
        mariadb.create_database(db)
        mariadb.execute(*mixed_setup(tables), SIGNAL_TABLE_DDL.format(table=SIGNALS),
                        f"CREATE TABLE {MARKER} (id INT PRIMARY KEY)", database=db)
        user = f"{db}_user"
        mariadb.snapshot_user(user, PASSWORD, db, SIGNALS)
        source = Source(mariadb, db, tables, seed=36)
        for table in tables:
            for _ in range(ROWS_BEFORE // 30):
                source.insert(table, [source.row(table) for _ in range(30)])
        source.commit()
        kafka_canal(db, flat=record_format is RecordFormat.FLAT)  # its stream starts here
        protobuf = record_format is RecordFormat.PROTOBUF
        kafka = KafkaSettings((kafka_broker.bootstrap,), db, f"group-{db}", record_format=record_format.value,
                              transaction_markers=protobuf, poll_timeout_ms=100)
        snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=user, password=PASSWORD,
                                    signal_table=f"{db}.{SIGNALS}", chunk_rows=20, parallelism=2,
                                    land_timeout_seconds=300)
        channels = tuple(ChannelSettings(t.qualified, f"lake.{db}.{t.name}",
                                         mode="changelog" if protobuf and t.name == CHANGELOG else "upsert")
                         for t in tables)
        settings = JobSettings(db, kafka, channels, CommitSettings(interval_seconds=0.5, min_events=1, min_bytes=1),
                               snapshot=snapshot)
        reader = SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, user, PASSWORD))
        job = SyncJob(settings, lambda channel, db=db: make_sink(spark, channel, db, spark_settings),
                      snapshot=SnapshotSource(lambda user=user: SourceDb(mariadb.host, mariadb.port, user, PASSWORD),
                                              reader))
        runs.append((record_format, db, tables, source, job))
    try:
        for _, _, _, _, job in runs:
            job.start()  # both snapshots run at once, each while its workload runs
        for _, _, tables, source, _ in runs:
            mixed_workload(source, tables, rounds=6)
        for record_format, db, tables, source, job in runs:
            caught_up(job, kafka_broker, db, source, record_format)
            assert job.stats.chunks_routed >= len(tables) * ROWS_BEFORE // 40
    finally:
        for _, _, _, _, job in runs:
            job.shutdown()

    for record_format, db, tables, source, _ in runs:
        for table in tables:
            target = f"lake.{db}.{table.name}"
            if record_format is RecordFormat.PROTOBUF and table.name == CHANGELOG:
                assert_changelog_once(spark, table, target)
                target = folded(spark, table, target)
            assert_target_equals_source(spark, source, table, target)


def caught_up(job: SyncJob, broker, db: str, source: Source, record_format: RecordFormat) -> None:
    """Wait until ``job``'s snapshot finished and the job committed everything Canal published."""
    runner = job.snapshot
    assert runner is not None
    assert eventually(lambda: runner.finished.is_set() or job.state is not JobState.RUNNING, 600)
    assert runner.finished.is_set(), f"{db}: the snapshot did not end: {job.state} {job.fail_message}"
    ends = published_ends(broker, db, 1, source, record_format, 1)

    def committed() -> bool:
        offsets = {p.partition: p.committed_offset or 0 for p in job.record().partitions}
        return all(offsets.get(partition, 0) >= end for partition, end in ends.items())

    assert job.acks.wait_until(committed, 240), f"{db}: {job.state} {job.fail_message} {job.stats}"
    assert job.state is JobState.RUNNING, job.fail_message
