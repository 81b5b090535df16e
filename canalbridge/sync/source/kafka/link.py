"""The one owner of the conversation with Canal's Kafka topic: reads, offset commits, seeks, and the hand-off.

The SourceLink of a job whose Canal runs with ``canal.serverMode = kafka``.
Only the Receiver's thread touches the kafka-python consumer (it is not
thread-safe): :meth:`KafkaLink.open` connects and assigns every partition of
the topic explicitly (no group rebalancing under the job; the group only
holds the committed offsets), and :meth:`KafkaLink.exchange` commits the
offsets the Consumer asked for, seeks back after a rollback, and polls.

Positions are :class:`~canalbridge.sync.model.position.KafkaPosition`\\ s, one
lane per partition; where each partition starts is decided by
:mod:`canalbridge.sync.source.kafka.start`. An offset is committed only once every
channel committed every entry before it; the snapshot of each target
carries every lane's mark, so a replay skips what a target holds.

Canal delivers at least once: copies of entries a partition delivered
before are dropped, and an entry Canal had not sent before, behind ones it
had, pauses the job (:mod:`canalbridge.sync.source.kafka.lanes`). Flat messages
carry no binlog position: a batch Canal sent twice is applied twice (an
upsert target ends the same; a changelog target holds the changes twice).
See docs/guide/kafka.md#positions.

Its length: both sides of the link share one lock around the lanes and the hand-off; what needs no
lock (the lanes, where each partition starts, the connection) is in the modules beside it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from canalbridge.canal import CanalBatch
from canalbridge.canal.kafka_records import RecordDecodeError, RecordFormat, decode_record
from canalbridge.sync.errors import KafkaRecordError, KafkaSourceError
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.record import PartitionRecord
from canalbridge.sync.model.tracking import AckState, CommittedPositions
from canalbridge.sync.source.handoff import HandOff
from canalbridge.sync.source.kafka import start as kafka_start
from canalbridge.sync.source.kafka.connect import END_OFFSETS_EVERY_S, connect, describe
from canalbridge.sync.source.kafka.lanes import KafkaLanes
from canalbridge.sync.source.kafka.settings import KafkaSettings
from canalbridge.sync.source.link import LinkSetup, Outstanding, TakenBatch

log = structlog.get_logger("canalbridge.kafka_link")


def one_partition_needed(partitions: int) -> str:
    """Why a snapshot refuses a topic of ``partitions`` partitions."""
    return (f"a snapshot needs the topic on one partition, and it has {partitions}: a chunk's signal rows must "
            "come in the same order as its table's changes, and records of two partitions have no order "
            "between them. Publish the job's tables to a topic of one partition (canal.mq.partitionsNum and "
            "partitionHash unset) while it snapshots, or set [job.snapshot] mode = \"never\"")


class KafkaLink:
    """kafka-python consumer, offsets and the bounded queue between Receiver and Consumer, under one lock."""

    resends_in_stream = False  # within a partition Kafka's order is the order Canal sent
    store_get_size = None  # the broker keeps what is not acked: no store fills up
    connection_errors: tuple[type[Exception], ...] = (KafkaSourceError,)

    def __init__(self, job: str, settings: KafkaSettings, capacity: int, acks: AckState,
                 committed: CommittedPositions, sources: Sequence[str],
                 consumer_factory: Callable[..., Any] | None = None, *, rules: bool = False,
                 snapshotting: Callable[[], bool] = lambda: False) -> None:
        self.job = job
        self.settings = settings
        self.acks = acks
        self.marks_transactions = settings.transaction_markers
        self.description = settings.description
        self._format = RecordFormat(settings.record_format)
        self._committed = committed
        self._sources = tuple(sources)
        # Rules make channels as their tables appear: the targets known at start are not all of them.
        self._rules = rules
        self._consumer_factory = consumer_factory
        # Whether a snapshot's windows are open or to come: they need the whole stream in one order.
        self._snapshotting = snapshotting
        self._consumer: Any = None
        self._assigned: list[Any] = []  # TopicPartitions
        # Every partition the link has assigned since it was made: one that appears later was added to the
        # topic while the job ran, and is read from its beginning whatever start_from says.
        self._seen: set[int] | None = None
        self._ends_read_at = 0.0
        self._lanes = KafkaLanes(settings.topic, self.description, flat=self._format is RecordFormat.FLAT)
        self._handoff: HandOff[TakenBatch] = HandOff(capacity)
        self._cond = self._handoff.lock  # (it guards the lanes and offsets too)
        self._epoch = 0
        self._rollback_due = False
        # A record that is not a Canal message: nothing past it is read; the job pauses on it once
        # every channel committed what came before it and Kafka has those offsets.
        self._poison: KafkaRecordError | None = None
        self._log = log.bind(job=job, kafka=settings.address, topic=settings.topic)

    # -- the Receiver's side ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._consumer is not None

    def open(self) -> None:
        """Connect, assign every partition and seek each to where the job resumes; a new epoch.

        Raises :class:`KafkaSourceError`: transient when the brokers cannot be
        reached, not when the topic does not exist or records the job needs
        are gone.
        """
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        self.disconnect()
        settings = self.settings
        consumer = connect(settings, self._consumer_factory)
        try:
            if settings.topic not in consumer.topics():
                raise KafkaSourceError(self.description, "the topic does not exist", transient=False)
            partitions = sorted(consumer.partitions_for_topic(settings.topic) or ())
            if len(partitions) > 1 and self._snapshotting():
                raise KafkaSourceError(self.description, one_partition_needed(len(partitions)), transient=False)
            if len(partitions) > 1 and self.marks_transactions:
                self._log.warning("kafka.markers_on_many_partitions", partitions=len(partitions),
                                  note="Canal drops transaction ends when it hashes partitions: set "
                                       "transaction_markers = false, or each commit waits max_source_txn_wait_seconds")
            assigned = [TopicPartition(settings.topic, partition) for partition in partitions]
            consumer.assign(assigned)
            added = set(partitions) - self._seen if self._seen is not None else set()
            starts = self._start_offsets(consumer, assigned, added)
            self._assigned = assigned
            self._ends_read_at = time.monotonic()
        except KafkaError as exc:
            consumer.close()
            raise KafkaSourceError(self.description, f"cannot read the topic's offsets: {describe(exc)}") from exc
        except BaseException:
            consumer.close()
            raise
        with self._cond:
            self._consumer = consumer
            self._seen = (self._seen or set()) | set(partitions)
            self._reset_locked()
            self._lanes.opened(starts)
            self._rollback_due = False
            epoch = self._epoch
        self._log.info("kafka.connected", epoch=epoch, partitions=len(partitions),
                       start={partition: starts[partition] for partition in partitions})
        if added:
            self._log.warning("kafka.partitions_added", added=sorted(added), partitions=len(partitions),
                              note="read from their beginning; see docs/guide/kafka.md#partitions-added")

    def _start_offsets(self, consumer: Any, assigned: Sequence[Any], added: set[int]) -> dict[int, int]:
        """Seek each partition to its start (:mod:`canalbridge.sync.source.kafka.start`); ``added``: partitions the
        topic gained while the job ran."""
        beginning = consumer.beginning_offsets(assigned, timeout_ms=self.settings.request_timeout_ms)
        end = consumer.end_offsets(assigned, timeout_ms=self.settings.request_timeout_ms)
        ran_before = kafka_start.ran_before(self._committed, self._sources)
        starts = {}
        for tp in assigned:
            group = consumer.committed(tp, timeout_ms=self.settings.request_timeout_ms)
            held = kafka_start.held_by_targets(self._committed, self._sources, f"{tp.topic}:{tp.partition}",
                                               rules=self._rules)
            earliest = kafka_start.from_beginning(self.settings.start_from, rules=self._rules,
                                                  added=tp.partition in added, ran_before=ran_before)
            start = kafka_start.start_offset(self.description, tp.partition, group, held, beginning[tp], end[tp],
                                             earliest=earliest)
            consumer.seek(tp, start)
            starts[tp.partition] = start
            with self._cond:
                lane = self._lanes.lane(tp.partition)
                lane.committed, lane.end = group, end[tp]
        return starts

    def disconnect(self) -> None:
        """Close the consumer (on the Receiver's thread)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with self._cond:
                # Stopping (not a failed conversation): every channel committed these, one last try.
                commits = self._lanes.take_commits() if self._handoff.closed else []
            try:
                if commits:
                    self._commit(consumer, commits)
            except Exception as exc:
                self._log.warning("kafka.last_offset_commit_failed", error=describe(exc))
            try:
                consumer.close(autocommit=False, timeout_ms=self.settings.request_timeout_ms)
            except Exception as exc:  # closing a consumer whose brokers went away
                self._log.debug("kafka.close_failed", error=str(exc))

    def wait_for_room(self, timeout_s: float) -> bool:
        """Wait until the queue can take one more batch (or :meth:`close` was called)."""
        return self._handoff.wait_for_room(timeout_s)

    def exchange(self) -> int:
        """Commit the offsets asked for, seek back if a rollback is due, then one poll; the entries queued.

        Raises :class:`KafkaSourceError` (transient) when the brokers fail
        (the caller reconnects) and :class:`KafkaRecordError` for a record
        that is not a Canal message.
        """
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        consumer = self._consumer
        topic = self.settings.topic
        with self._cond:
            commits = self._lanes.take_commits()
            rollback = self._rollback_due
            epoch = self._epoch
        try:
            if commits:
                self._commit(consumer, commits)
            if rollback:
                with self._cond:
                    seeks = self._lanes.seeks()
                for partition, offset in seeks.items():
                    consumer.seek(TopicPartition(topic, partition), offset)
                with self._cond:
                    if self._epoch == epoch:
                        self._rollback_due = False
                        self._lanes.rolled_back()
                    epoch = self._epoch
            with self._cond:
                poison = self._poison
                if poison is not None:
                    if not self._lanes.holds_entries:
                        raise poison
                    self._cond.wait(self.settings.poll_timeout_ms / 1000)  # for the commit of what came before
                    return 0
            polled = consumer.poll(timeout_ms=self.settings.poll_timeout_ms)
            ends = {tp: consumer.highwater(tp) for tp in polled}
            grown: set[int] = set()
            if time.monotonic() - self._ends_read_at >= END_OFFSETS_EVERY_S:
                ends = consumer.end_offsets(self._assigned, timeout_ms=self.settings.request_timeout_ms)
                self._ends_read_at = time.monotonic()
                grown = set(consumer.partitions_for_topic(topic) or ()) - {tp.partition for tp in self._assigned}
            with self._cond:
                for tp, end in ends.items():
                    if end is not None:
                        self._lanes.lane(tp.partition).end = end
        except (KafkaError, OSError) as exc:
            with self._cond:
                self._lanes.requeue(commits)
            raise KafkaSourceError(self.description, describe(exc)) from exc
        if grown:
            # Partitions added to the topic: reconnect (what is not committed is read again) and assign them all.
            raise KafkaSourceError(self.description, f"the topic has new partitions {sorted(grown)}: reconnecting to "
                                                     f"read them")
        queued = 0
        for tp, records in polled.items():
            queued += self._receive(epoch, tp.partition, records)
        return queued

    def _commit(self, consumer: Any, commits: list[tuple[dict[int, int], Position | None]]) -> None:
        """Commit the offsets asked for (the later of each partition's), then record the acks."""
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        offsets = {partition: offset for asked, _ in commits for partition, offset in asked.items()}
        consumer.commit({TopicPartition(self.settings.topic, partition): OffsetAndMetadata(offset, "", -1)
                         for partition, offset in offsets.items()}, timeout_ms=self.settings.request_timeout_ms)
        with self._cond:
            self._lanes.committed(offsets)
        for _, cut in commits:
            if cut is not None:
                self.acks.record(cut)

    def _receive(self, epoch: int, partition: int, records: Sequence[Any]) -> int:
        """Decode one partition's records, drop copies, give positions, and queue them as one batch."""
        if not records:
            return 0
        with self._cond:
            if epoch != self._epoch or self._rollback_due:
                return 0  # read before a rollback: the seek reads them again
            others = self._lanes.others(partition)
            mark = self._lanes.lanes[partition].mark
        decoded: list[tuple[int, CanalBatch]] = []
        raw_size = 0
        poison: KafkaRecordError | None = None
        for record in records:
            try:
                batch = decode_record(record.value, self._format)
            except RecordDecodeError as exc:
                # What came before it is queued and committed; the job then pauses at it (exchange).
                poison = KafkaRecordError(self.description, partition, record.offset, str(exc))
                break
            raw_size += batch.raw_size
            decoded.append((record.offset, batch))
        if not decoded:
            assert poison is not None
            self._poisoned(epoch, poison)
            return 0
        sifted = self._lanes.sift(partition, mark, decoded, others)
        first, next_offset = decoded[0][0], decoded[-1][0] + 1
        with self._cond:
            if epoch != self._epoch or self._rollback_due:
                return 0
            taken = self._lanes.file(epoch, partition, next_offset, sifted, raw_size)
            if taken is not None:
                self._handoff.put_locked(taken)
        if sifted.copies:
            self._log.info("kafka.copies_dropped", partition=partition, copies=sifted.copies,
                           offsets=f"{first}-{next_offset - 1}")
        if poison is not None:
            self._poisoned(epoch, poison)
        return len(sifted.entries)

    def _poisoned(self, epoch: int, poison: KafkaRecordError) -> None:
        with self._cond:
            if epoch == self._epoch and not self._rollback_due and self._poison is None:
                self._poison = poison
                self._log.warning("kafka.record_not_canal", partition=poison.partition, offset=poison.offset,
                                  note="committing what came before it, then pausing")

    # -- the Consumer's side -----------------------------------------------------------------

    @property
    def epoch(self) -> int:
        with self._cond:
            return self._epoch

    def is_current(self, epoch: int) -> bool:
        with self._cond:
            return epoch == self._epoch and not self._rollback_due

    def take(self, timeout_s: float) -> TakenBatch | None:
        """The oldest queued batch, or None after ``timeout_s`` or once :meth:`close` was called."""
        return self._handoff.take(timeout_s, lambda taken: self._lanes.taken(taken.batch_id))

    def supersede(self, epoch: int, batch_id: int, counts_through: Position | None) -> None:
        """Never needed: a Kafka partition does not go back within an epoch (copies are dropped here)."""

    def ack_through(self, epoch: int, cut: Position | None) -> int:
        """Ask to commit the offsets of every taken batch of ``epoch`` at or before ``cut``; how many batches."""
        if cut is None:
            return 0
        with self._cond:
            return self._lanes.ack_through(cut) if epoch == self._epoch else 0

    def rollback(self) -> int:
        """Void every batch handed out; the Receiver seeks back to what was acked. Returns the new epoch."""
        with self._cond:
            return self._reset_locked()

    @property
    def outstanding(self) -> Outstanding:
        """Entries and bytes taken and not yet asked to be acked (Kafka keeps them: no store fills up)."""
        with self._cond:
            return self._lanes.outstanding

    def snapshot_refusal(self) -> str | None:
        """Why a snapshot cannot start now (None: it can): the topic has more than one partition."""
        with self._cond:
            count = len(self._lanes.lanes)  # (none before the link first opened: then open() refuses)
        return one_partition_needed(count) if count > 1 else None

    def partitions(self) -> tuple[PartitionRecord, ...]:
        """Each partition's offsets and last committed entry, for status and metrics."""
        with self._cond:
            return self._lanes.records()

    # -- both --------------------------------------------------------------------------------

    def close(self) -> None:
        """Wake every waiter for good; the Receiver closes the consumer as it ends."""
        self._handoff.close()

    def _reset_locked(self) -> int:
        self._epoch += 1
        self._poison = None  # read again after the seek, if it is still there
        self._lanes.reset()
        self._rollback_due = True
        self._handoff.clear_locked()
        return self._epoch


def open_link(setup: LinkSetup, kafka: KafkaSettings) -> KafkaLink:
    """The link of a job that reads ``kafka``: the targets of its channels named for one table are where its
    partitions may start."""
    job = setup.job
    return KafkaLink(job.name, kafka, job.commit.queue_batches, setup.acks, setup.committed,
                     [channel.source for channel in job.channels if channel.pattern is None],
                     rules=job.has_rules, snapshotting=setup.snapshotting)
