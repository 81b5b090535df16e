"""What a Kafka-mode job knows of each partition of Canal's topic: where it stands, and what may be acked.

Each partition is a *lane* (:class:`Lane`). What one poll read of a
partition is a *chunk* (:class:`Chunk`), acked (its offsets committed) once
the Consumer committed every entry of it and of the chunks before it.
:class:`KafkaLanes` is the link's ledger of lanes and chunks, as
:class:`~canalbridge.sync.source.canal.ledger.BatchLedger` is Canal's: pure, no I/O, no
lock (the link holds its lock around every call).

Canal delivers at least once: when a send fails it sends the whole batch
again, into partitions that already had it too. In protobuf records the
entries carry their binlog positions, so an entry at or before what its
partition already delivered, and among the keys it delivered last
(:class:`Window`), is such a copy and is dropped (:meth:`KafkaLanes.sift`).
One that was not delivered before (a gap in Canal's first pass, filled
late) and one of another binlog (a failover) pause the job instead.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from canalbridge.canal import CanalBatch
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import KafkaSourceError
from canalbridge.sync.model.position import EntryPosition, KafkaPosition, LaneMark, Position
from canalbridge.sync.model.record import PartitionRecord
from canalbridge.sync.source.link import Outstanding, TakenBatch


@dataclass
class Chunk:
    """Consecutive records of one partition from one poll: what one ack covers."""

    epoch: int
    partition: int
    next_offset: int  # the offset after its last record: committed once the chunk is acked
    last: KafkaPosition | None  # its last entry, or the lane's last delivered one when all were copies
    taken: bool = False  # handed to the Consumer (a chunk of copies only needs no routing)
    entries: int = 0
    raw_size: int = 0


class Window:
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
class Lane:
    """What the link knows of one partition."""

    partition: int
    name: str
    acked_next: int = 0  # the offset after everything the Consumer asked to ack
    committed: int | None = None  # the offset Kafka confirmed for the group
    end: int | None = None
    mark: LaneMark | None = None  # the last entry delivered in this epoch
    acked_entry: KafkaPosition | None = None  # the last entry of the last acked chunk
    copies: int = 0  # entries dropped as copies of ones delivered before
    window: Window = field(default_factory=Window)  # protobuf: the keys delivered last (the Receiver's)

    def last_delivered(self) -> KafkaPosition | None:
        mark = self.mark
        if mark is None:
            return None
        return KafkaPosition(mark.journal, mark.offset, lane=self.name, occurrence=mark.occurrence,
                             resume=mark.resume)


@dataclass(frozen=True)
class Sifted:
    """One partition's records of one poll, copies dropped: the entries to route and their positions."""

    entries: list[entry_pb.Entry]
    positions: list[Position]
    copies: int
    mark: LaneMark | None  # the lane's mark after them
    last: KafkaPosition | None  # the last entry kept


class KafkaLanes:
    """The lanes of one topic, the chunks read and not yet acked, and the offsets asked to be committed."""

    def __init__(self, topic: str, description: str, *, flat: bool) -> None:
        self.topic = topic
        self.description = description  # how errors name the source
        self.flat = flat  # flat messages carry no binlog position: each lane orders itself
        self.lanes: dict[int, Lane] = {}
        self.unacked: collections.deque[Chunk] = collections.deque()
        self._chunks: dict[int, Chunk] = {}  # by batch id, until the Consumer takes it
        # Offsets asked for, and the cut that acks them (None: a start the targets held, ahead of the group).
        self.to_commit: list[tuple[dict[int, int], Position | None]] = []
        self._next_batch_id = 0

    def lane(self, partition: int) -> Lane:
        lane = self.lanes.get(partition)
        if lane is None:
            lane = self.lanes[partition] = Lane(partition, f"{self.topic}:{partition}")
        return lane

    def opened(self, starts: Mapping[int, int]) -> None:
        """The consumer reads each partition from ``starts``: every mark goes back there."""
        for partition, start in starts.items():
            lane = self.lane(partition)
            lane.acked_next = start
            # Read from the start offset on: every cut then carries every partition, so a target's
            # snapshot says where each one resumes even if it had no rows there (the channels'
            # positions skip what their targets hold).
            lane.mark = LaneMark.before(start)
            lane.window.clear()
        ahead = {partition: start for partition, start in starts.items()
                 if start > (self.lanes[partition].committed or 0)}
        if ahead:  # the targets hold more than the group says: bring the group up to them
            self.to_commit.append((ahead, None))

    def seeks(self) -> dict[int, int]:
        """Where each partition is read again from after a rollback: after what was acked."""
        return {lane.partition: lane.acked_next for lane in self.lanes.values()}

    def rolled_back(self) -> None:
        """The consumer seeked back: read again from what was acked; copies of what came before still drop."""
        for lane in self.lanes.values():
            lane.mark = (lane.acked_entry.mark if lane.acked_entry is not None
                         else LaneMark.before(lane.acked_next))

    def others(self, partition: int) -> Mapping[str, LaneMark]:
        """Every other lane's mark (what a position of ``partition`` carries of the others)."""
        lane = self.lanes[partition]
        return MappingProxyType({other.name: other.mark for other in self.lanes.values()
                                 if other is not lane and other.mark is not None})

    def sift(self, partition: int, mark: LaneMark | None, records: Sequence[tuple[int, CanalBatch]],
             others: Mapping[str, LaneMark]) -> Sifted:
        """One partition's records of one poll ((offset, entries) each), after ``mark``: the entries to route,
        copies of entries the lane delivered before dropped.

        Raises :class:`KafkaSourceError` for an entry Canal had not sent before, behind ones it had (a gap
        in its first pass), and for one of another binlog (a failover). Runs on the Receiver's thread
        without the link's lock: the lane's window is the Receiver's alone.
        """
        lane = self.lanes[partition]
        entries: list[entry_pb.Entry] = []
        positions: list[Position] = []
        copies = 0
        last: KafkaPosition | None = None
        protobuf = not self.flat
        for offset, batch in records:
            for position, entry in zip(entry_positions(lane.name, offset, batch, others, flat=self.flat),
                                       batch.entries):
                key = position.mark.sort_key
                if mark is not None and protobuf and mark.journal and \
                        EntryPosition(position.journal, 0).from_another_binlog_than(EntryPosition(mark.journal, 0)):
                    raise KafkaSourceError(
                        self.description, f"partition {partition} offset {offset}: an entry of binlog "
                        f"{position.journal} after {mark.journal}:{mark.offset}: MySQL failed over or its binlog "
                        "was reset, and positions no longer compare; the job pauses rather than guess",
                        transient=False)
                if mark is not None and key <= mark.sort_key:
                    if not lane.window.sent_before(key):
                        raise self._gap(partition, offset, position)
                    copies += 1  # Canal sent its batch again: this partition has it already
                    continue
                if protobuf:
                    lane.window.add(key)
                mark = position.mark
                last = position
                entries.append(entry)
                positions.append(position)
        return Sifted(entries, positions, copies, mark, last)

    def _gap(self, partition: int, offset: int, position: KafkaPosition) -> KafkaSourceError:
        return KafkaSourceError(
            self.description,
            f"partition {partition} offset {offset}: Canal sent an entry at {position.journal}:{position.offset} "
            "behind entries it had sent, without having sent it before (its first pass skipped it, as it can "
            "when its MySQL connection breaks); applied now it could undo later changes, so the job pauses. "
            "See docs/guide/kafka.md#positions", transient=False)

    def file(self, epoch: int, partition: int, next_offset: int, sifted: Sifted, raw_size: int) -> TakenBatch | None:
        """File one partition's records of one poll (through ``next_offset``) as a chunk; the batch to hand to
        the Consumer, or None when every entry was a copy (the chunk is then acked with what it copies)."""
        lane = self.lanes[partition]
        lane.copies += sifted.copies
        mark = sifted.mark
        if mark is not None:
            lane.mark = mark._replace(resume=next_offset) if sifted.last is None else mark
        chunk = Chunk(epoch, partition, next_offset, sifted.last or lane.last_delivered(),
                      entries=len(sifted.entries), raw_size=raw_size)
        self.unacked.append(chunk)
        if not sifted.entries:
            chunk.taken = True
            return None
        self._next_batch_id += 1
        self._chunks[self._next_batch_id] = chunk
        return TakenBatch(CanalBatch(self._next_batch_id, tuple(sifted.entries), raw_size), epoch,
                          self._next_batch_id, tuple(sifted.positions))

    def taken(self, batch_id: int) -> None:
        """The Consumer took the batch: its chunk may be acked once it committed it."""
        self._chunks.pop(batch_id).taken = True

    def ack_through(self, cut: Position) -> int:
        """Ask to commit the offsets of every taken chunk at or before ``cut``, oldest first; how many batches."""
        acked = 0
        offsets: dict[int, int] = {}
        while self.unacked:
            chunk = self.unacked[0]
            if not chunk.taken or (chunk.last is not None and not chunk.last <= cut):
                break
            self.unacked.popleft()
            lane = self.lanes[chunk.partition]
            lane.acked_next = offsets[chunk.partition] = chunk.next_offset
            if chunk.last is not None:
                lane.acked_entry = chunk.last
            acked += 1 if chunk.entries else 0
        if offsets:
            self.to_commit.append((offsets, cut))
        return acked

    def take_commits(self) -> list[tuple[dict[int, int], Position | None]]:
        """The offsets asked to be committed (each with the cut that acks it), handed over once."""
        commits, self.to_commit = self.to_commit, []
        return commits

    def requeue(self, commits: list[tuple[dict[int, int], Position | None]]) -> None:
        """The exchange that was to commit ``commits`` failed (perhaps after committing them): every channel
        committed them, so they go first after the reconnect (an offset committed twice is harmless)."""
        self.to_commit = commits + self.to_commit

    def committed(self, offsets: Mapping[int, int]) -> None:
        """Kafka confirmed these offsets for the group."""
        for partition, offset in offsets.items():
            self.lanes[partition].committed = offset

    @property
    def outstanding(self) -> Outstanding:
        """Entries and bytes taken and not yet asked to be acked (Kafka keeps them: no store fills up)."""
        taken = [chunk for chunk in self.unacked if chunk.taken]
        return Outstanding(sum(chunk.entries for chunk in taken), sum(chunk.raw_size for chunk in taken))

    @property
    def holds_entries(self) -> bool:
        """Whether a chunk with entries is not acked yet, or offsets wait to be committed."""
        return any(chunk.entries for chunk in self.unacked) or bool(self.to_commit)

    def reset(self) -> None:
        """Every chunk read so far is void (a rollback or a reconnect)."""
        self.unacked.clear()
        self._chunks.clear()

    def records(self) -> tuple[PartitionRecord, ...]:
        """Each partition's offsets and last committed entry, for status and metrics."""
        lanes = sorted(self.lanes.values(), key=lambda lane: lane.partition)
        return tuple(PartitionRecord(
            lane.partition, lane.committed, lane.end,
            None if lane.acked_entry is None or lane.acked_entry.journal == lane.name
            else f"{lane.acked_entry.journal}:{lane.acked_entry.offset}",
            lane.acked_entry.execute_time_ms if lane.acked_entry is not None else None,
            lane.copies,
        ) for lane in lanes)


def entry_positions(lane: str, offset: int, batch: CanalBatch, others: Mapping[str, LaneMark], *,
                    flat: bool) -> list[KafkaPosition]:
    """Each entry's position in its lane (see KafkaPosition); the last one resumes after the record."""
    positions = []
    count = len(batch.entries)
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

