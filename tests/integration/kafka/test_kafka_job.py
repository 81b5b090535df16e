"""A job reading Canal's Kafka topic from a real broker into in-memory targets: no Spark, no Canal.

The records are what Canal 1.1.7 writes (tests.infra.kafka_feed, which
follows what tests/integration/real/test_canal_kafka_mode.py pins of the real Canal).
Every test ends with the targets equal to the workload's tables and each row
change applied once, and the group's offsets committed through the end.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db import SourceDbError
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.errors import TargetSourceMismatchError
from canalbridge.sync.job.job import FailKind, JobState, SyncJob
from canalbridge.sync.model.position import EntryPosition, KafkaPosition
from canalbridge.sync.model.record import PartitionRecord
from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.source import SnapshotSource
from canalbridge.sync.source.kafka.settings import KafkaSettings
from tests.helpers import eventually
from tests.infra.kafka_broker import KafkaBroker
from tests.infra.kafka_feed import flat_records, hashed_protobuf_records, protobuf_records, publish
from tests.infra.memory_writer import CommitRecord, InMemoryWriter
from tests.integration.sync.harness import expected_row_writes

pytestmark = pytest.mark.kafka

COMMITS = CommitSettings(interval_seconds=0.2, min_events=300, min_bytes=1, max_bytes=1 << 30, retries=3,
                         retry_initial_seconds=0.01, retry_max_seconds=0.05, reconnect_attempts=5,
                         max_source_txn_wait_seconds=30.0)


class KafkaJob:
    """A job over one topic, in-memory writers, and the checks every test wants."""

    def __init__(self, bootstrap: str, topic: str, workload: Workload, *, record_format: str = "protobuf",
                 markers: bool | None = None, group: str | None = None, commit: CommitSettings = COMMITS,
                 security: dict[str, str] | None = None, request_timeout_ms: int = 2000,
                 channels: tuple[ChannelSettings, ...] | None = None) -> None:
        self.bootstrap, self.topic, self.workload = bootstrap, topic, workload
        self.group = group or f"group-{topic}"
        kafka = KafkaSettings((bootstrap,), topic, self.group, record_format=record_format,
                              transaction_markers=record_format == "protobuf" if markers is None else markers,
                              poll_timeout_ms=100, max_poll_records=50, request_timeout_ms=request_timeout_ms,
                              security=security or {})
        if channels is None:
            channels = tuple(ChannelSettings(t.qualified, f"lake.{t.qualified}") for t in workload.spec.tables)
        self.settings = JobSettings("kjob", kafka, channels, commit)
        self.writers: dict[str, InMemoryWriter] = {}
        self.job = SyncJob(self.settings, self._sink)
        self.partitions: tuple[PartitionRecord, ...] = ()  # as the last run left them

    def _sink(self, channel: ChannelSettings) -> ChannelSink:
        writer = self.writers[channel.source] = InMemoryWriter(channel.source)
        return ChannelSink.of(writer)

    def group_offsets(self) -> dict[int, int | None]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False)
        try:
            partitions = sorted(consumer.partitions_for_topic(self.topic) or ())
            return {p: consumer.committed(TopicPartition(self.topic, p)) for p in partitions}
        finally:
            consumer.close()

    def set_group_offsets(self, offsets: dict[int, int]) -> None:
        """Commit ``offsets`` for the job's group, as if the job's own commits had been lost."""
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False)
        try:
            consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        finally:
            consumer.close()

    def wait_committed(self, ends: dict[int, int], timeout_s: float = 60) -> None:
        """Until the link committed every partition through ``ends`` (its record of what Kafka confirmed)."""
        def done() -> bool:
            committed = {p.partition: p.committed_offset for p in self.job.record().partitions}
            return all((committed.get(p) or 0) >= end for p, end in ends.items())

        assert self.job.acks.wait_until(done, timeout_s), (
            f"not committed through {ends} in {timeout_s} s: {self.job.state} {self.job.fail_message} "
            f"{self.job.record().partitions}")

    def applied(self) -> Counter:
        return Counter({name: sum(c.rows for c in w.commits) for name, w in self.writers.items()})

    def assert_tables(self) -> None:
        for name, expected in self.workload.expected.items():
            assert self.writers[name].rows == expected.canal_rows(), name


def workload(changes: int = 1500, seed: int = 7, *, key_changes: bool = True) -> tuple[Workload, list[entry_pb.Entry]]:
    """A workload; without ``key_changes`` for topics hashed by key, where Canal sends an update that
    changes a key with the new key, so it can overtake the old key's earlier changes
    (docs/guide/kafka.md#hashed-partitions)."""
    load = Workload(WorkloadSpec(row_changes=changes, seed=seed, pk_change_ratio=0.1 if key_changes else 0.0))
    return load, list(load)


def run(job: KafkaJob, ends: dict[int, int], *, resume: bool = False) -> None:
    job.job.resume() if resume else job.job.start()
    try:
        job.wait_committed(ends)
    finally:
        job.partitions = job.job.record().partitions
        if job.job.state is JobState.RUNNING:
            job.job.pause()


def transaction_ends(entries: Sequence[entry_pb.Entry]) -> set[tuple[str, int]]:
    return {(e.header.logfileName, e.header.logfileOffset) for e in entries
            if e.entryType == entry_pb.EntryType.TRANSACTIONEND}


def test_a_protobuf_topic_is_applied_once_and_commits_keep_source_transactions_whole(kafka_broker, topic):
    name = topic(1)
    load, entries = workload()
    ends = publish(kafka_broker.bootstrap, name, {0: protobuf_records(entries, batch_entries=37)})
    job = KafkaJob(kafka_broker.bootstrap, name, load)
    run(job, ends)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries)
    assert job.group_offsets() == ends
    cuts = {(c.end_position.journal, c.end_position.offset) for w in job.writers.values() for c in w.commits}
    assert cuts and cuts <= transaction_ends(entries), "a commit ended inside a source transaction"
    assert job.job.stats.split_source_txns == 0


def test_a_flat_topic_is_applied_once(kafka_broker, topic):
    name = topic(1)
    load, entries = workload(seed=8)
    ends = publish(kafka_broker.bootstrap, name, {0: flat_records(entries)})
    job = KafkaJob(kafka_broker.bootstrap, name, load, record_format="flat")
    run(job, ends)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries)
    assert job.group_offsets() == ends
    position = next(iter(job.writers.values())).committed_position()
    assert isinstance(position, KafkaPosition) and position.journal == f"{name}:0"


def test_three_partitions_hashed_by_key_are_applied_once(kafka_broker, topic):
    name = topic(3)
    load, entries = workload(seed=9, key_changes=False)
    records = hashed_protobuf_records(entries, 3, batch_entries=40)
    assert all(records.values()), "every partition gets rows"
    ends = publish(kafka_broker.bootstrap, name, records)
    job = KafkaJob(kafka_broker.bootstrap, name, load, markers=False)
    run(job, ends)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries)
    assert job.group_offsets() == ends
    position = next(iter(job.writers.values())).committed_position()
    assert isinstance(position, KafkaPosition) and set(position.marks()) == {f"{name}:{p}" for p in range(3)}


def test_batches_canal_sent_twice_are_dropped(kafka_broker, topic):
    """Canal sends a whole batch again when a send failed: the copies carry the same binlog positions."""
    name = topic(1)
    load, entries = workload(seed=10)
    records = protobuf_records(entries, batch_entries=40)
    resent = records[:6] + records[3:9] + records[5:]  # two re-sends, overlapping what came before
    ends = publish(kafka_broker.bootstrap, name, {0: resent})
    job = KafkaJob(kafka_broker.bootstrap, name, load)
    run(job, ends)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries), "a copy was applied"
    (partition,) = job.partitions
    assert partition.copies_dropped == 3 * 40 + 4 * 40


def test_a_restart_after_a_lost_offset_commit_resumes_from_what_the_targets_hold(kafka_broker, topic):
    name = topic(2)
    load, entries = workload(seed=11, key_changes=False)
    halves = hashed_protobuf_records(entries, 2, batch_entries=25)
    first = {p: records[: len(records) // 2] for p, records in halves.items()}
    ends = publish(kafka_broker.bootstrap, name, first)
    job = KafkaJob(kafka_broker.bootstrap, name, load, markers=False)
    run(job, ends)
    assert job.group_offsets() == ends
    job.set_group_offsets({p: 0 for p in ends})  # the offset commits are lost
    rest = {p: records[len(records) // 2:] for p, records in halves.items()}
    ends = publish(kafka_broker.bootstrap, name, rest)
    routed = job.job.stats.rows_routed
    run(job, ends, resume=True)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries), "a row change was applied twice or lost"
    # The job resumed where the targets were, not from the group's offsets: nothing was read twice.
    assert job.job.stats.skipped == 0
    assert job.job.stats.rows_routed - routed == sum(expected_row_writes(entries).values()) - routed


def test_a_pattern_job_restarted_on_lost_offsets_applies_each_change_once(kafka_broker, topic):
    # Its channels open as their tables are met, so it cannot know what every target holds before it
    # reads: it starts from the group's offsets, and what the targets hold is skipped.
    name = topic(2)
    load, entries = workload(seed=13, key_changes=False)
    halves = hashed_protobuf_records(entries, 2, batch_entries=25)
    rule = ChannelSettings("shop.*", "lake.{schema}.{table}", pattern=TablePattern("shop.*"))
    job = KafkaJob(kafka_broker.bootstrap, name, load, markers=False, channels=(rule,))
    ends = publish(kafka_broker.bootstrap, name, {p: records[: len(records) // 2] for p, records in halves.items()})
    run(job, ends)
    job.set_group_offsets({p: 0 for p in ends})  # the offset commits are lost
    ends = publish(kafka_broker.bootstrap, name, {p: records[len(records) // 2:] for p, records in halves.items()})
    run(job, ends, resume=True)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries), "a row change was applied twice or lost"
    assert job.job.stats.skipped > 0  # the first half came again
    assert {c.source: c.rule for c in job.job.record().channels} == {t: "shop.*" for t in load.expected}


def test_a_record_that_is_not_a_canal_message_pauses_the_job_naming_it_until_skipped(kafka_broker, topic):
    name = topic(1)
    load, entries = workload(changes=600, seed=12)
    good = protobuf_records(entries, batch_entries=30)
    ends = publish(kafka_broker.bootstrap, name, {0: [*good[:10], b"not a canal packet", *good[10:]]})
    # The record falls inside a source transaction: its first part is committed after this wait.
    job = KafkaJob(kafka_broker.bootstrap, name, load,
                   commit=dataclasses.replace(COMMITS, max_source_txn_wait_seconds=1.0))
    job.job.start()
    assert job.job.wait_state(JobState.PAUSED, 60), job.job.state
    message = str(job.job.fail_message)
    assert f"topic {name}" in message and "partition 0 offset 10" in message and "not a Canal message" in message
    # What came before the record is committed, in the targets and in Kafka; nothing past it.
    assert job.group_offsets()[0] == 10
    before = [e for record in good[:10] for e in _entries(record)]
    assert job.applied() == expected_row_writes(before)
    assert ends[0] == len(good) + 1
    # What an operator does (docs/guide/kafka.md#bad-record): move the group's offset past the record, then resume.
    job.set_group_offsets({0: 11})
    run(job, ends, resume=True)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries), "a row change was applied twice or lost"


def _entries(record: bytes) -> list[entry_pb.Entry]:
    from canalbridge.canal.kafka_records import RecordFormat, decode_record

    return list(decode_record(record, RecordFormat.PROTOBUF).entries)


def test_settings_name_the_source_without_secrets():
    settings = KafkaSettings(("127.0.0.1:9092",), "t", "g", security={"sasl_plain_password": "hunter2"})
    assert "hunter2" not in repr(settings) and "hunter2" not in settings.description
    assert dataclasses.replace(settings, topic="u").description == "kafka 127.0.0.1:9092 topic u"


@pytest.fixture
def own_broker(tmp_path):
    """A broker of this test's own, to stop and start."""
    broker = KafkaBroker(tmp_path / "kafka").start()
    yield broker
    broker.stop()


def test_a_broker_that_goes_away_and_comes_back_loses_nothing(own_broker):
    own_broker.create_topic("outage", 1)
    load, entries = workload(seed=13)
    records = protobuf_records(entries, batch_entries=30)
    ends = publish(own_broker.bootstrap, "outage", {0: records[:20]})
    job = KafkaJob(own_broker.bootstrap, "outage", load, commit=dataclasses.replace(
        COMMITS, reconnect_attempts=60, retry_initial_seconds=0.1, retry_max_seconds=1.0))
    job.job.start()
    try:
        job.wait_committed(ends)
        own_broker.stop()
        own_broker.start()
        ends = publish(own_broker.bootstrap, "outage", {0: records[20:]})
        job.wait_committed(ends, timeout_s=120)
        assert job.job.state is JobState.RUNNING
    finally:
        job.job.pause()
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries)


def test_a_broker_that_stays_away_pauses_the_job_naming_it(own_broker):
    own_broker.create_topic("gone", 1)
    load, entries = workload(changes=200, seed=14)
    ends = publish(own_broker.bootstrap, "gone", {0: protobuf_records(entries)})
    job = KafkaJob(own_broker.bootstrap, "gone", load)  # 5 attempts, waits of at most 0.05 s
    job.job.start()
    job.wait_committed(ends)
    own_broker.stop()
    assert job.job.wait_state(JobState.PAUSED, 120), job.job.state
    message = str(job.job.fail_message)
    assert f"kafka {own_broker.bootstrap} topic gone: gave up after 5 connection attempts" in message, message
    job.assert_tables()


def test_a_quiet_partition_and_lost_offsets_still_apply_each_change_once(kafka_broker, topic):
    """Every cut carries every partition, even one that had nothing since the job started."""
    name = topic(2)
    load, entries = workload(seed=15, key_changes=False)
    records = hashed_protobuf_records(entries, 2, batch_entries=25)
    half = {p: len(values) // 2 for p, values in records.items()}
    job = KafkaJob(kafka_broker.bootstrap, name, load, markers=False)
    first = publish(kafka_broker.bootstrap, name, {p: values[: half[p]] for p, values in records.items()})
    run(job, first)
    run(job, publish(kafka_broker.bootstrap, name, {1: records[1][half[1]:]}), resume=True)  # partition 0 quiet
    job.set_group_offsets(first)  # the last run's offset commits are lost
    ends = publish(kafka_broker.bootstrap, name, {0: records[0][half[0]:]})
    run(job, {0: ends[0], 1: len(records[1])}, resume=True)
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries), "a row change was applied twice or lost"


def test_an_entry_canal_skipped_and_sends_later_pauses_the_job(kafka_broker, topic):
    """A gap in Canal's first pass, filled by its second: applying it late could undo later changes."""
    name = topic(1)
    load, entries = workload(changes=600, seed=16)
    rows = [i for i, e in enumerate(entries) if e.entryType == entry_pb.EntryType.ROWDATA]
    missing = rows[len(rows) // 2]
    first = protobuf_records(entries[:missing] + entries[missing + 1:missing + 20], batch_entries=20)
    second = protobuf_records(entries[missing - 5:], batch_entries=20)  # sent again from before the gap
    publish(kafka_broker.bootstrap, name, {0: first + second})
    job = KafkaJob(kafka_broker.bootstrap, name, load)
    job.job.start()
    assert job.job.wait_state(JobState.PAUSED, 60), job.job.state
    message = str(job.job.fail_message)
    header = entries[missing].header
    assert f"Canal sent an entry at {header.logfileName}:{header.logfileOffset} behind entries it had sent" in message


def test_an_entry_of_another_binlog_pauses_the_job(kafka_broker, topic):
    name = topic(1)
    load, entries = workload(changes=300, seed=17)
    moved = [entry_pb.Entry.FromString(e.SerializeToString()) for e in entries[len(entries) // 2:]]
    for entry in moved:
        entry.header.logfileName = "mariadb-bin.000001"  # a failed-over server's binlog
    publish(kafka_broker.bootstrap, name, {0: protobuf_records(entries[: len(entries) // 2] + moved, 20)})
    job = KafkaJob(kafka_broker.bootstrap, name, load)
    job.job.start()
    assert job.job.wait_state(JobState.PAUSED, 60), job.job.state
    assert "an entry of binlog mariadb-bin.000001 after mysql-bin." in str(job.job.fail_message)


def test_a_target_written_through_canal_tcp_is_not_read_through_kafka(kafka_broker, topic):
    name = topic(1)
    load, _ = workload(changes=100, seed=18)
    job = KafkaJob(kafka_broker.bootstrap, name, load)

    def tcp_sink(channel: ChannelSettings) -> ChannelSink:
        writer = job.writers[channel.source] = InMemoryWriter(channel.source)
        writer.commits.append(CommitRecord("old", EntryPosition("mysql-bin.000003", 4521), 0))
        return ChannelSink.of(writer)

    job.job = SyncJob(job.settings, tcp_sink)
    with pytest.raises(TargetSourceMismatchError, match="was written through Canal's TCP protocol"):
        job.job.start()
    # Paused for a person (a retry cannot make the positions compare), never cancelled: only a user cancels.
    assert job.job.state is JobState.PAUSED and job.job.fail_message.kind is FailKind.SUBMIT_FAIL


def test_a_topic_that_does_not_exist_pauses_the_job_at_once(kafka_broker):
    load, _ = workload(changes=50, seed=19)
    job = KafkaJob(kafka_broker.bootstrap, "no-such-topic", load)
    job.job.start()
    assert job.job.wait_state(JobState.PAUSED, 60), job.job.state
    assert str(job.job.fail_message).endswith(
        f"kafka {kafka_broker.bootstrap} topic no-such-topic: the topic does not exist")


def test_sasl_credentials_are_used_and_refused_ones_pause_the_job_without_showing_them(tmp_path):
    broker = KafkaBroker(tmp_path / "kafka", sasl_users={"bridge": "bridge-secret-1"}).start()
    try:
        broker.create_topic("secured", 1)
        load, entries = workload(changes=300, seed=20)
        ends = publish(broker.bootstrap, "secured", {0: protobuf_records(entries)}, **broker.client_security())
        # A bootstrap long enough for the refusal to come back on a loaded machine (kafka-python only
        # logs it, and times the bootstrap out).
        wrong = KafkaJob(broker.bootstrap, "secured", load, security=broker.client_security("bridge", "not-it-42"),
                         request_timeout_ms=15_000)
        wrong.job.start()
        assert wrong.job.wait_state(JobState.PAUSED, 180), wrong.job.state
        message = str(wrong.job.fail_message)
        # Named at once when kafka-python read the refusal; when it saw only the broker closing the
        # connection (it does, now and then, under load), the job pauses after its attempts, with a hint.
        assert (f"kafka {broker.bootstrap} topic secured: the brokers refused the credentials: Authentication "
                "failed" in message) or ("gave up after 5 connection attempts" in message
                                         and "(with SASL: check the credentials too)" in message), message
        assert "not-it-42" not in message
        right = KafkaJob(broker.bootstrap, "secured", load, security=broker.client_security("bridge"))
        run(right, ends)
        right.assert_tables()
    finally:
        broker.stop()


def test_a_partition_added_while_the_job_runs_is_read_from_its_beginning(kafka_broker, topic):
    # Issue 33, hole 6: partitions were listed once, at connect; one added to Canal's topic was never read.
    name = topic(2)
    load, entries = workload(seed=15, key_changes=False)
    ends_at = [i for i, e in enumerate(entries) if e.entryType == entry_pb.EntryType.TRANSACTIONEND]
    half = ends_at[len(ends_at) // 2] + 1
    job = KafkaJob(kafka_broker.bootstrap, name, load, markers=False)
    job.job.start()
    try:
        job.wait_committed(publish(kafka_broker.bootstrap, name, hashed_protobuf_records(entries[:half], 2)))
        kafka_broker.add_partitions(name, 3)  # Canal's partitionsNum raised to 3 with it: the rest hashes over 3
        rest = hashed_protobuf_records(entries[half:], 3, batch_entries=25)
        assert rest[2], "the new partition gets rows"
        job.wait_committed(publish(kafka_broker.bootstrap, name, rest))
        partitions = {p.partition for p in job.job.record().partitions}
    finally:
        job.job.pause()
    assert partitions == {0, 1, 2}  # status and lag cover the new partition
    job.assert_tables()
    assert job.applied() == expected_row_writes(entries), "a row change was applied twice or lost"


def test_a_snapshot_refuses_a_topic_of_two_partitions_naming_why(kafka_broker, topic):
    # Signal rows in one partition and the table's changes in another have no order between them: a window
    # could miss a change it must note, and the chunk's older row would land over it.
    name = topic(2)
    load, _ = workload(changes=50, seed=23)
    base = KafkaJob(kafka_broker.bootstrap, name, load, markers=False)
    snapshot = SnapshotSettings(host="127.0.0.1", user="u", signal_table="db.canalbridge_signal")

    def connect() -> Any:  # the source does not answer until the job stops: the snapshot runs while the link opens
        assert eventually(lambda: job.snapshot is not None, 30)  # (set once start() has the run)
        job.snapshot._stop.wait(60)
        raise SourceDbError("the test's source is gone", address="127.0.0.1:3306")

    job = SyncJob(dataclasses.replace(base.settings, snapshot=snapshot), base._sink,
                  snapshot=SnapshotSource(connect, None))  # type: ignore[arg-type]
    job.start()
    try:
        assert job.wait_state(JobState.PAUSED, 60), job.state
        assert job.fail_message.text.startswith(f"kafka {kafka_broker.bootstrap} topic {name}: a snapshot needs the "
                                                f"topic on one partition, and it has 2")
    finally:
        job.shutdown()
