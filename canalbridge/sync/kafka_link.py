"""The one owner of the conversation with Canal's Kafka topic: reads, offset commits, seeks, and the hand-off.

The SourceLink of a job whose Canal runs with ``canal.serverMode = kafka``.
Only the Receiver's thread touches the kafka-python consumer (it is not
thread-safe): :meth:`KafkaLink.open` connects and assigns every partition of
the topic explicitly (no group rebalancing under the job; the group only
holds the committed offsets), and :meth:`KafkaLink.exchange` commits the
offsets the Consumer asked for, seeks back after a rollback, and polls.

Positions are :class:`~canalbridge.sync.position.KafkaPosition`\\ s, one
lane per partition. Where to start a partition: the group's committed offset,
or the offset every channel's target already holds when that is further
(the offset commit after an Iceberg commit can be lost), else
``start_from``. An offset is committed only once every channel committed
every entry before it; the snapshot of each target carries every lane's
mark, so a replay skips what a target holds.

Canal delivers at least once: when a send fails it sends the whole batch
again, into partitions that already had it too. In protobuf records the
entries carry their binlog positions, so an entry at or before what its
partition already delivered, and among the keys it delivered last
(:class:`_Window`), is such a copy and is dropped here. One that was not
delivered before (a gap in Canal's first pass, filled late) and one of
another binlog (a failover) pause the job instead. Flat messages carry no
binlog position: a batch Canal sent twice is applied twice (an upsert
target ends the same; a changelog target holds the changes twice). See
docs/guide/kafka.md#positions.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import structlog

from canalbridge.canal import CanalBatch
from canalbridge.canal.kafka_records import RecordDecodeError, RecordFormat, decode_record
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import KafkaRecordError, KafkaSourceError
from canalbridge.sync.ledger import Outstanding
from canalbridge.sync.position import AckState, CommittedPositions, EntryPosition, KafkaPosition, LaneMark, Position
from canalbridge.sync.record import PartitionRecord
from canalbridge.sync.settings import KafkaSettings
from canalbridge.sync.source import TakenBatch

log = structlog.get_logger("canalbridge.kafka_link")

# How often the end offsets are read (for the lag in status); it also notices brokers that went away,
# which kafka-python's poll does not report (it returns nothing and keeps reconnecting).
END_OFFSETS_EVERY_S = 5.0


@dataclass
class _Chunk:
    """Consecutive records of one partition from one poll: what one ack covers."""

    epoch: int
    partition: int
    next_offset: int  # the offset after its last record: committed once the chunk is acked
    last: KafkaPosition | None  # its last entry, or the lane's last delivered one when all were copies
    taken: bool = False  # handed to the Consumer (a chunk of copies only needs no routing)
    entries: int = 0
    raw_size: int = 0


class _Window:
    """The order keys of the entries a protobuf partition delivered last, oldest first.

    An entry at or before the partition's mark is one Canal sent again (a
    failed send, or its parser reconnecting to MySQL) if its key is here; one
    that is not, but falls among them, is an entry Canal had not sent before,
    behind ones it had: a gap in its first pass. Canal sends again at most a
    batch or the transaction its parser was in, far fewer than ``SIZE``.
    """

    SIZE = 65_536

    def __init__(self) -> None:
        self._keys: collections.deque[tuple[Any, ...]] = collections.deque()
        self._held: set[tuple[Any, ...]] = set()

    def add(self, key: tuple[Any, ...]) -> None:
        self._keys.append(key)
        self._held.add(key)
        if len(self._keys) > self.SIZE:
            self._held.discard(self._keys.popleft())

    def sent_before(self, key: tuple[Any, ...]) -> bool:
        """Whether an entry at ``key`` (at or before the mark) was delivered, as far as the window tells."""
        return key in self._held or not self._keys or key < self._keys[0]

    def clear(self) -> None:
        self._keys.clear()
        self._held.clear()


@dataclass
class _Lane:
    """What the link knows of one partition."""

    partition: int
    name: str
    acked_next: int = 0  # the offset after everything the Consumer asked to ack
    committed: int | None = None  # the offset Kafka confirmed for the group
    end: int | None = None
    mark: LaneMark | None = None  # the last entry delivered in this epoch
    acked_entry: KafkaPosition | None = None  # the last entry of the last acked chunk
    copies: int = 0  # entries dropped as copies of ones delivered before
    window: _Window = field(default_factory=_Window)  # protobuf: the keys delivered last (the Receiver's)


class KafkaLink:
    """kafka-python consumer, offsets and the bounded queue between Receiver and Consumer, under one lock."""

    resends_in_stream = False  # within a partition Kafka's order is the order Canal sent
    connection_errors: tuple[type[Exception], ...] = (KafkaSourceError,)

    def __init__(self, job: str, settings: KafkaSettings, capacity: int, acks: AckState,
                 committed: CommittedPositions, sources: Sequence[str],
                 consumer_factory: Callable[..., Any] | None = None, *, rules: bool = False) -> None:
        self.job = job
        self.settings = settings
        self.capacity = capacity
        self.acks = acks
        self.marks_transactions = settings.transaction_markers
        self.description = settings.description
        self._format = RecordFormat(settings.record_format)
        self._committed = committed
        self._sources = tuple(sources)
        # Rules make channels as their tables appear: the targets known at start are not all of them.
        self._rules = rules
        self._consumer_factory = consumer_factory
        self._consumer: Any = None
        self._assigned: list[Any] = []  # TopicPartitions
        # Every partition the link has assigned since it was made: one that appears later was added to the
        # topic while the job ran, and is read from its beginning whatever start_from says.
        self._seen: set[int] | None = None
        self._ends_read_at = 0.0
        self._lanes: dict[int, _Lane] = {}
        self._queue: collections.deque[TakenBatch] = collections.deque()
        self._unacked: collections.deque[_Chunk] = collections.deque()
        self._chunks: dict[int, _Chunk] = {}  # by batch id, until the Consumer takes it
        # Offsets asked for, and the cut that acks them (None: a start the targets held, ahead of the group).
        self._to_commit: list[tuple[dict[int, int], Position | None]] = []
        self._epoch = 0
        self._rollback_due = False
        # A record that is not a Canal message: nothing past it is read; the job pauses on it once
        # every channel committed what came before it and Kafka has those offsets.
        self._poison: KafkaRecordError | None = None
        self._closed = False
        self._next_batch_id = 0
        self._cond = threading.Condition()
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
        from kafka.errors import KafkaConfigurationError, KafkaError

        self.disconnect()
        settings = self.settings
        with _RefusedLogins(settings.bootstrap_servers) as refused:
            try:
                consumer = self._new_consumer()
            except (KafkaConfigurationError, ValueError, OSError) as exc:  # OSError: an unreadable SSL file
                raise KafkaSourceError(self.description, f"the consumer settings are wrong: {_describe(exc)}",
                                       transient=False) from exc
            except KafkaError as exc:
                if refused.reason is not None:  # retrying the same credentials cannot help
                    raise KafkaSourceError(self.description, f"the brokers refused the credentials: {refused.reason}",
                                           transient=False) from exc
                # The broker closes a refused login's connection; kafka-python sees the refusal only
                # when it reads the reply first, else a lost connection, the same as a network fault.
                hint = " (with SASL: check the credentials too)" if "sasl_mechanism" in settings.security else ""
                raise KafkaSourceError(self.description, f"cannot connect: {_describe(exc)}{hint}") from exc
        try:
            if settings.topic not in consumer.topics():
                raise KafkaSourceError(self.description, "the topic does not exist", transient=False)
            partitions = sorted(consumer.partitions_for_topic(settings.topic) or ())
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
            raise KafkaSourceError(self.description, f"cannot read the topic's offsets: {_describe(exc)}") from exc
        except BaseException:
            consumer.close()
            raise
        with self._cond:
            self._consumer = consumer
            self._seen = (self._seen or set()) | set(partitions)
            for partition in partitions:
                lane = self._lanes.setdefault(partition, _Lane(partition, f"{settings.topic}:{partition}"))
                lane.acked_next = starts[partition]
                # Read from the start offset on: every cut then carries every partition, so a target's
                # snapshot says where each one resumes even if it had no rows there (the channels'
                # positions skip what their targets hold).
                lane.mark = LaneMark.before(starts[partition])
                lane.window.clear()
            self._reset_locked()
            self._rollback_due = False
            epoch = self._epoch
            ahead = {p: starts[p] for p in partitions if starts[p] > (self._lanes[p].committed or 0)}
            if ahead:  # the targets hold more than the group says: bring the group up to them
                self._to_commit.append((ahead, None))
        self._log.info("kafka.connected", epoch=epoch, partitions=len(partitions),
                       start={partition: starts[partition] for partition in partitions})
        if added:
            self._log.warning("kafka.partitions_added", added=sorted(added), partitions=len(partitions),
                              note="read from their beginning; see docs/guide/kafka.md#partitions-added")

    def _new_consumer(self) -> Any:
        from kafka import KafkaConsumer

        settings = self.settings
        factory = self._consumer_factory or KafkaConsumer
        return factory(
            bootstrap_servers=list(settings.bootstrap_servers), group_id=settings.group_id,
            # "none": an offset out of range raises instead of jumping (every seek here is explicit).
            client_id=settings.client_id, enable_auto_commit=False, auto_offset_reset="none",
            max_poll_records=settings.max_poll_records, bootstrap_timeout_ms=settings.request_timeout_ms,
            # The topic's metadata as often as the end offsets are read, so that an added partition is seen.
            metadata_max_age_ms=int(END_OFFSETS_EVERY_S * 1000),
            **dict(settings.security),
        )

    def _start_offsets(self, consumer: Any, assigned: Sequence[Any], added: set[int]) -> dict[int, int]:
        """Each partition's start: the group's offset, or the targets' when every target is further.

        A partition with neither starts where ``start_from`` says, unless it is one of ``added`` (the topic
        gained it while the job ran): that one starts at its beginning, since its records came after the job's
        start.
        """
        beginning = consumer.beginning_offsets(assigned, timeout_ms=self.settings.request_timeout_ms)
        end = consumer.end_offsets(assigned, timeout_ms=self.settings.request_timeout_ms)
        starts = {}
        for tp in assigned:
            group = consumer.committed(tp, timeout_ms=self.settings.request_timeout_ms)
            held = self._held_by_targets(f"{tp.topic}:{tp.partition}")
            known = [offset for offset in (group, held) if offset is not None]
            if not known:
                # With no group offset, a target that holds any Kafka position means the job ran before:
                # read from the beginning (replays are skipped) rather than jump to the end.
                # A job with rules cannot tell before it reads: it reads from the beginning too.
                earliest = self.settings.start_from == "earliest" or self._rules or tp.partition in added or any(
                    isinstance(self._committed.get(source), KafkaPosition) for source in self._sources)
                start = beginning[tp] if earliest else end[tp]
            else:
                start = max(known)
                if start < beginning[tp]:
                    raise KafkaSourceError(
                        self.description,
                        f"partition {tp.partition}: the job resumes at offset {start}, but the topic keeps records "
                        f"only from offset {beginning[tp]} on (retention deleted what the job has not read)",
                        transient=False)
            consumer.seek(tp, start)
            starts[tp.partition] = start
            with self._cond:
                lane = self._lanes.setdefault(tp.partition, _Lane(tp.partition, f"{tp.topic}:{tp.partition}"))
                lane.committed, lane.end = group, end[tp]
        return starts

    def _held_by_targets(self, lane: str) -> int | None:
        """The offset every channel's target holds this lane through (None if one holds nothing of it, or if
        rules may have targets not met yet)."""
        if self._rules:
            return None
        offsets = []
        for source in self._sources:
            position = self._committed.get(source)
            mark = position.mark_in(lane) if isinstance(position, KafkaPosition) else None
            if mark is None:
                return None
            offsets.append(mark.resume)
        return min(offsets) if offsets else None

    def disconnect(self) -> None:
        """Close the consumer (on the Receiver's thread)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with self._cond:
                # Stopping (not a failed conversation): every channel committed these, one last try.
                commits, self._to_commit = (self._to_commit, []) if self._closed else ([], self._to_commit)
            try:
                if commits:
                    self._commit(consumer, commits)
            except Exception as exc:
                self._log.warning("kafka.last_offset_commit_failed", error=_describe(exc))
            try:
                consumer.close(autocommit=False, timeout_ms=self.settings.request_timeout_ms)
            except Exception as exc:  # closing a consumer whose brokers went away
                self._log.debug("kafka.close_failed", error=str(exc))

    def wait_for_room(self, timeout_s: float) -> bool:
        """Wait until the queue can take one more batch (or :meth:`close` was called)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._queue) < self.capacity or self._closed, timeout_s)

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
            commits, self._to_commit = self._to_commit, []
            rollback = self._rollback_due
            epoch = self._epoch
        try:
            if commits:
                self._commit(consumer, commits)
            if rollback:
                with self._cond:
                    seeks = {lane.partition: lane.acked_next for lane in self._lanes.values()}
                for partition, offset in seeks.items():
                    consumer.seek(TopicPartition(topic, partition), offset)
                with self._cond:
                    if self._epoch == epoch:
                        self._rollback_due = False
                        for lane in self._lanes.values():
                            # Read again from what was acked: copies of what came before still drop.
                            lane.mark = (lane.acked_entry.mark if lane.acked_entry is not None
                                         else LaneMark.before(lane.acked_next))
                    epoch = self._epoch
            with self._cond:
                poison = self._poison
                if poison is not None:
                    if not any(chunk.entries for chunk in self._unacked) and not self._to_commit:
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
                        self._lanes[tp.partition].end = end
        except (KafkaError, OSError) as exc:
            with self._cond:
                self._to_commit = commits + self._to_commit  # all channels committed them: sent after the reconnect
            raise KafkaSourceError(self.description, _describe(exc)) from exc
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
            for partition, offset in offsets.items():
                self._lanes[partition].committed = offset
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
            lane = self._lanes[partition]
            others = MappingProxyType({other.name: other.mark for other in self._lanes.values()
                                       if other is not lane and other.mark is not None})
            mark = lane.mark
        entries: list[entry_pb.Entry] = []
        positions: list[Position] = []
        raw_size = 0
        copies = 0
        last: KafkaPosition | None = None
        poison: KafkaRecordError | None = None
        for index, record in enumerate(records):
            try:
                batch = decode_record(record.value, self._format)
            except RecordDecodeError as exc:
                # What came before it is queued and committed; the job then pauses at it (exchange).
                poison = KafkaRecordError(self.description, partition, record.offset, str(exc))
                records = records[:index]
                break
            raw_size += batch.raw_size
            for position, entry in zip(self._positions(lane.name, record.offset, batch, others), batch.entries):
                key = position.mark.sort_key
                if mark is not None and self._format is RecordFormat.PROTOBUF and mark.journal and \
                        EntryPosition(position.journal, 0).from_another_binlog_than(EntryPosition(mark.journal, 0)):
                    raise KafkaSourceError(
                        self.description, f"partition {partition} offset {record.offset}: an entry of binlog "
                        f"{position.journal} after {mark.journal}:{mark.offset}: MySQL failed over or its binlog was "
                        "reset, and positions no longer compare; the job pauses rather than guess", transient=False)
                if mark is not None and key <= mark.sort_key:
                    if not lane.window.sent_before(key):
                        raise self._gap(partition, record.offset, position)
                    copies += 1  # Canal sent its batch again: this partition has it already
                    continue
                if self._format is RecordFormat.PROTOBUF:
                    lane.window.add(key)
                mark = position.mark
                last = position
                entries.append(entry)
                positions.append(position)
        if not records:
            assert poison is not None
            self._poisoned(epoch, poison)
            return 0
        next_offset = records[-1].offset + 1
        with self._cond:
            if epoch != self._epoch or self._rollback_due:
                return 0
            lane.copies += copies
            if mark is not None:
                lane.mark = mark._replace(resume=next_offset) if last is None else mark
            chunk = _Chunk(epoch, partition, next_offset, last or self._last_delivered(lane), entries=len(entries),
                           raw_size=raw_size)
            self._unacked.append(chunk)
            if entries:
                self._next_batch_id += 1
                self._chunks[self._next_batch_id] = chunk
                self._queue.append(TakenBatch(CanalBatch(self._next_batch_id, tuple(entries), raw_size), epoch,
                                              self._next_batch_id, tuple(positions)))
                self._cond.notify_all()
            else:
                chunk.taken = True  # copies only: acked with what they copy
        if copies:
            self._log.info("kafka.copies_dropped", partition=partition, copies=copies,
                           offsets=f"{records[0].offset}-{records[-1].offset}")
        if poison is not None:
            self._poisoned(epoch, poison)
        return len(entries)

    def _poisoned(self, epoch: int, poison: KafkaRecordError) -> None:
        with self._cond:
            if epoch == self._epoch and not self._rollback_due and self._poison is None:
                self._poison = poison
                self._log.warning("kafka.record_not_canal", partition=poison.partition, offset=poison.offset,
                                  note="committing what came before it, then pausing")

    def _gap(self, partition: int, offset: int, position: KafkaPosition) -> KafkaSourceError:
        return KafkaSourceError(
            self.description,
            f"partition {partition} offset {offset}: Canal sent an entry at {position.journal}:{position.offset} "
            "behind entries it had sent, without having sent it before (its first pass skipped it, as it can "
            "when its MySQL connection breaks); applied now it could undo later changes, so the job pauses. "
            "See docs/guide/kafka.md#positions", transient=False)

    def _last_delivered(self, lane: _Lane) -> KafkaPosition | None:
        mark = lane.mark
        if mark is None:
            return None
        return KafkaPosition(mark.journal, mark.offset, lane=lane.name, occurrence=mark.occurrence,
                             resume=mark.resume)

    def _positions(self, lane: str, offset: int, batch: CanalBatch,
                   others: Mapping[str, LaneMark]) -> list[KafkaPosition]:
        """Each entry's position in its lane (see KafkaPosition); the last one resumes after the record."""
        positions = []
        count = len(batch.entries)
        flat = self._format is RecordFormat.FLAT
        seen: dict[tuple[str, int], int] = {}
        for index, entry in enumerate(batch.entries):
            header = entry.header
            resume = offset + 1 if index == count - 1 else offset
            if flat:
                journal, place, occurrence = lane, offset, index
            else:
                journal, place = header.logfileName, header.logfileOffset
                occurrence = seen.get((journal, place), 0)
                seen[(journal, place)] = occurrence + 1
            positions.append(KafkaPosition(journal, place, header.executeTime, header.gtid, lane, occurrence, resume,
                                           others))
        return positions

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
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._queue) or self._closed, timeout_s) or self._closed:
                return None
            taken = self._queue.popleft()
            self._chunks.pop(taken.batch_id).taken = True
            self._cond.notify_all()
            return taken

    def supersede(self, epoch: int, batch_id: int, counts_through: Position | None) -> None:
        """Never needed: a Kafka partition does not go back within an epoch (copies are dropped here)."""

    def ack_through(self, epoch: int, cut: Position | None) -> int:
        """Ask to commit the offsets of every taken batch of ``epoch`` at or before ``cut``; how many batches."""
        if cut is None:
            return 0
        with self._cond:
            if epoch != self._epoch:
                return 0
            acked = 0
            offsets: dict[int, int] = {}
            while self._unacked:
                chunk = self._unacked[0]
                if not chunk.taken or (chunk.last is not None and not chunk.last <= cut):
                    break
                self._unacked.popleft()
                lane = self._lanes[chunk.partition]
                lane.acked_next = offsets[chunk.partition] = chunk.next_offset
                if chunk.last is not None:
                    lane.acked_entry = chunk.last
                acked += 1 if chunk.entries else 0
            if offsets:
                self._to_commit.append((offsets, cut))
            return acked

    def rollback(self) -> int:
        """Void every batch handed out; the Receiver seeks back to what was acked. Returns the new epoch."""
        with self._cond:
            return self._reset_locked()

    @property
    def outstanding(self) -> Outstanding:
        """Entries and bytes taken and not yet asked to be acked (Kafka keeps them: no store fills up)."""
        with self._cond:
            taken = [chunk for chunk in self._unacked if chunk.taken]
            return Outstanding(sum(chunk.entries for chunk in taken), sum(chunk.raw_size for chunk in taken))

    def partitions(self) -> tuple[PartitionRecord, ...]:
        """Each partition's offsets and last committed entry, for status and metrics."""
        with self._cond:
            lanes = sorted(self._lanes.values(), key=lambda lane: lane.partition)
            return tuple(PartitionRecord(
                lane.partition, lane.committed, lane.end,
                None if lane.acked_entry is None or lane.acked_entry.journal == lane.name
                else f"{lane.acked_entry.journal}:{lane.acked_entry.offset}",
                lane.acked_entry.execute_time_ms if lane.acked_entry is not None else None,
                lane.copies,
            ) for lane in lanes)

    # -- both --------------------------------------------------------------------------------

    def close(self) -> None:
        """Wake every waiter for good; the Receiver closes the consumer as it ends."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _reset_locked(self) -> int:
        self._epoch += 1
        self._poison = None  # read again after the seek, if it is still there
        self._queue.clear()
        self._unacked.clear()
        self._chunks.clear()
        self._rollback_due = True
        self._cond.notify_all()
        return self._epoch


class _RefusedLogins(logging.Handler):
    """While a consumer bootstraps, the brokers' refusal of its login, as kafka-python logs it.

    kafka-python does not raise a refused SASL login: it retries the bootstrap
    until it times out and raises "Unable to bootstrap", logging each refusal
    (without the password). This keeps the last refusal that names one of the
    job's brokers, so the job can say why it cannot connect.
    """

    def __init__(self, servers: Sequence[str]) -> None:
        super().__init__(logging.WARNING)
        self._servers = tuple(servers)
        self.reason: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "AuthenticationFailed" in message and (
                record.name.startswith("kafka.net.manager") or any(server in message for server in self._servers)):
            start = message.find("Authentication failed")
            reason = message[start:] if start >= 0 else message[message.index("AuthenticationFailed") - 4:]
            self.reason = reason.split("(backoff")[0].strip(" ()[")

    def __enter__(self) -> _RefusedLogins:
        logging.getLogger("kafka").addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("kafka").removeHandler(self)


def _describe(exc: BaseException) -> str:
    """kafka-python's error, named; its messages never hold the SASL password."""
    text = str(exc)
    name = type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}" if text else name
