"""Binlog positions, batch ranges, and the consumer's position bookkeeping.

Positions are totally ordered by (binlog journal, offset). Journal names are
compared by their numeric suffix when they have one (``mysql-bin.000010``
after ``mysql-bin.000009`` even if a file ever has more digits), and the
comparison never narrows a number (Doris cast a long difference to int).
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

_JOURNAL_RE = re.compile(r"^(.*?)(\d+)$")


@functools.lru_cache(maxsize=4096)  # every entry compares positions; a binlog has few file names
def journal_key(journal: str) -> tuple[str, int, str]:
    """Sort key for a binlog file name: prefix, then the number it ends with."""
    match = _JOURNAL_RE.match(journal)
    if match is None:
        return (journal, -1, journal)
    return (match.group(1), int(match.group(2)), journal)


class EntryPosition(NamedTuple):
    """Where an entry sits in the binlog, with its execute time and gtid.

    A NamedTuple rather than a frozen dataclass: the Consumer makes one per
    entry, and this is three times cheaper to build. Order is binlog order
    (the comparisons below), not a tuple's; equality is a tuple's, every field.
    """

    journal: str
    offset: int
    execute_time_ms: int = 0
    gtid: str = ""

    @classmethod
    def of(cls, entry: entry_pb.Entry) -> EntryPosition:
        header = entry.header
        return cls(header.logfileName, header.logfileOffset, header.executeTime, header.gtid)

    @property
    def sort_key(self) -> tuple[tuple[str, int, str], int]:
        return (journal_key(self.journal), self.offset)

    # Most comparisons are within one binlog file: offsets alone decide them.
    def __lt__(self, other: EntryPosition) -> bool:  # type: ignore[override]
        if self.journal == other.journal:
            return self.offset < other.offset
        return self.sort_key < other.sort_key

    def __le__(self, other: EntryPosition) -> bool:  # type: ignore[override]
        if self.journal == other.journal:
            return self.offset <= other.offset
        return self.sort_key <= other.sort_key

    def __gt__(self, other: EntryPosition) -> bool:  # type: ignore[override]
        if self.journal == other.journal:
            return self.offset > other.offset
        return self.sort_key > other.sort_key

    def __ge__(self, other: EntryPosition) -> bool:  # type: ignore[override]
        if self.journal == other.journal:
            return self.offset >= other.offset
        return self.sort_key >= other.sort_key

    def same_place(self, other: EntryPosition) -> bool:
        return self.sort_key == other.sort_key

    def __str__(self) -> str:
        return f"{self.journal}:{self.offset}"

    def to_dict(self) -> dict[str, str | int]:
        """The one serialised form: state store, status JSON and snapshot summaries use it."""
        return {"journal": self.journal, "offset": self.offset, "gtid": self.gtid,
                "execute_time_ms": self.execute_time_ms}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> EntryPosition:
        """Read :meth:`to_dict`'s form back; values may come as strings (snapshot summaries)."""
        return cls(str(data["journal"]), int(str(data["offset"])), int(str(data.get("execute_time_ms") or 0)),
                   str(data.get("gtid") or ""))

    def from_another_binlog_than(self, acked: EntryPosition) -> bool:
        """True if this entry cannot be a re-delivery of the binlog ``acked`` came from.

        A restarted Canal re-delivers from the transaction its cursor is in,
        and its saved cursor trails the acks by at most one flush, so a
        re-delivered entry is never more than one binlog file behind. A file
        of another name, or further behind, means another server (a MySQL
        failover) or a reset binlog: positions no longer compare.
        """
        prefix, number, _ = journal_key(self.journal)
        acked_prefix, acked_number, _ = journal_key(acked.journal)
        return prefix != acked_prefix or number < acked_number - 1


class LaneMark(NamedTuple):
    """How far one Kafka partition's stream has been read: its last entry's order key, and where to resume.

    ``journal``/``offset``/``occurrence`` order the entries of one
    partition (see :class:`KafkaPosition`); ``resume`` is the Kafka offset
    from which a restart reads the partition again.
    """

    journal: str
    offset: int
    occurrence: int
    resume: int

    @property
    def sort_key(self) -> tuple[tuple[str, int, str], int, int]:
        return (journal_key(self.journal), self.offset, self.occurrence)

    @classmethod
    def before(cls, resume: int) -> LaneMark:
        """The mark of a partition read from ``resume`` on, before any entry: below every entry's."""
        return cls("", -1, 0, resume)


class KafkaPosition(NamedTuple):
    """Where an entry read from Canal's Kafka topic sits: in its partition (a *lane*), and the other lanes then.

    Kafka orders entries only within a partition, so a position compares
    with another only in its own lane: ``a < b`` when ``a`` comes before
    what ``b`` had read of ``a``'s lane (``b`` itself if it is in that lane,
    else ``b.lanes``); a lane ``b`` had not read is one ``a`` is after. The
    Consumer's checks (already committed, already acked, went back) and its
    commit cut then mean the same as with binlog positions, and a cut (the
    last position routed) carries every lane's mark into the snapshot.

    Within a lane the order key is the binlog position for protobuf records
    (``journal``, ``offset``, and ``occurrence`` among entries Canal split
    from one rows event), which makes a batch Canal sent twice show up as
    going back; for flat messages, which carry no binlog position, it is
    the record's Kafka offset and the entry's index in it (``journal`` is
    then the lane's name).
    """

    journal: str
    offset: int
    execute_time_ms: int = 0
    gtid: str = ""
    lane: str = ""  # "topic:partition"
    occurrence: int = 0
    resume: int = 0  # the Kafka offset a restart reads this lane from
    lanes: Mapping[str, LaneMark] = MappingProxyType({})  # the other lanes' marks (never this one's)

    def __hash__(self) -> int:
        # The lanes (a mapping) cannot be hashed; equal positions still hash alike.
        return hash((self.lane, self.journal, self.offset, self.occurrence))

    @property
    def mark(self) -> LaneMark:
        return LaneMark(self.journal, self.offset, self.occurrence, self.resume)

    def mark_in(self, lane: str) -> LaneMark | None:
        """How far this position had read ``lane`` (None: not at all)."""
        return self.mark if lane == self.lane else self.lanes.get(lane)

    def marks(self) -> dict[str, LaneMark]:
        """Every lane's mark, this one's included."""
        return {**self.lanes, self.lane: self.mark}

    def _order(self, other: object) -> int:
        """-1, 0 or 1: this entry against what ``other`` had read of this entry's lane (1 if nothing)."""
        if not isinstance(other, KafkaPosition):
            raise TypeError(f"a Kafka position does not compare with {type(other).__name__}")
        theirs = other.mark_in(self.lane)
        if theirs is None:
            return 1
        if theirs.journal == self.journal:
            mine_key: tuple[object, ...] = (self.offset, self.occurrence)
            their_key: tuple[object, ...] = (theirs.offset, theirs.occurrence)
        else:
            mine_key, their_key = self.mark.sort_key, theirs.sort_key
        return (mine_key > their_key) - (mine_key < their_key)

    def __lt__(self, other: object) -> bool:
        return self._order(other) < 0

    def __le__(self, other: object) -> bool:
        return self._order(other) <= 0

    def __gt__(self, other: object) -> bool:
        return self._order(other) > 0

    def __ge__(self, other: object) -> bool:
        return self._order(other) >= 0

    def same_place(self, other: KafkaPosition) -> bool:
        return self._order(other) == 0

    @property
    def sort_key(self) -> tuple[tuple[str, int, str], int, int]:
        return self.mark.sort_key

    def merged(self, other: KafkaPosition) -> KafkaPosition:
        """Each lane at the further of the two marks (the fields of this lane's entry from whichever is further)."""
        marks = self.marks()
        for lane, mark in other.marks().items():
            known = marks.get(lane)
            if known is None or mark.sort_key > known.sort_key:
                marks[lane] = mark
        base = other if self.lane == other.lane and other > self else self
        own = marks.pop(base.lane)
        return base._replace(journal=own.journal, offset=own.offset, occurrence=own.occurrence, resume=own.resume,
                             lanes=MappingProxyType(marks))

    def __str__(self) -> str:
        where = f"{self.lane} from offset {self.resume}"
        return where if self.journal == self.lane else f"{where} ({self.journal}:{self.offset})"

    def to_dict(self) -> dict[str, object]:
        """The serialised form (state store, status, snapshot summaries): the entry's fields and every lane."""
        return {"journal": self.journal, "offset": self.offset, "gtid": self.gtid,
                "execute_time_ms": self.execute_time_ms, "lane": self.lane,
                "kafka": {lane: list(mark) for lane, mark in sorted(self.marks().items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> KafkaPosition:
        lane = str(data["lane"])
        raw = data["kafka"]
        lanes = json.loads(raw) if isinstance(raw, str) else raw
        assert isinstance(lanes, dict), "a Kafka position's lanes"
        marks = {str(name): LaneMark(str(m[0]), int(m[1]), int(m[2]), int(m[3])) for name, m in lanes.items()}
        own = marks.pop(lane)
        return cls(own.journal, own.offset, int(str(data.get("execute_time_ms") or 0)), str(data.get("gtid") or ""),
                   lane, own.occurrence, own.resume, MappingProxyType(marks))


#: A position of either source: binlog positions over Canal's TCP protocol, lane positions over Kafka.
Position = EntryPosition | KafkaPosition


def position_from_dict(data: Mapping[str, object]) -> Position:
    """Read either position type's ``to_dict`` form back (values may come as strings)."""
    if data.get("lane"):
        return KafkaPosition.from_dict(data)
    return EntryPosition.from_dict(data)


def later(known: Position | None, position: Position) -> Position:
    """What is known after ``position``: binlog positions take the later, Kafka positions merge lane by lane."""
    if known is None:
        return position
    if isinstance(known, KafkaPosition) and isinstance(position, KafkaPosition):
        return known.merged(position)
    if isinstance(known, KafkaPosition) or isinstance(position, KafkaPosition):
        return position  # positions of another source (a job moved to Kafka) do not compare
    return position if position > known else known


class TakenPositions:
    """The positions of one batch's entries, in the order routed.

    Kept as a list of journal names and one of offsets: a list of positions
    would keep an object per entry alive, a whole Canal store's worth, for
    the garbage collector to walk again and again.
    """

    __slots__ = ("_journals", "_offsets")

    def __init__(self) -> None:
        self._journals: list[str] = []
        self._offsets: list[int] = []

    def append(self, position: Position) -> None:
        self._journals.append(position.journal)
        self._offsets.append(position.offset)

    def count_from(self, position: Position) -> int:
        """How many of the positions are at or after ``position``."""
        return sum(1 for journal, offset in zip(self._journals, self._offsets)
                   if EntryPosition(journal, offset) >= position)


@dataclass(frozen=True)
class PositionRange:
    """The first and last position of a batch."""

    start: EntryPosition
    end: EntryPosition


@dataclass(frozen=True)
class Ack:
    """A position Canal confirmed as acked, and when."""

    position: Position
    time_ms: int


class AckState:
    """The last ack Canal confirmed. Written by the job's CanalLink only; read by status.

    The value is swapped whole, so a reader never sees a position with
    another ack's time.
    """

    def __init__(self, last: Ack | None = None) -> None:
        self.last = last
        self._changed = threading.Condition()

    def record(self, position: Position) -> None:
        """The source confirmed acks through a batch ending at ``position``.

        The position never moves back: a batch of entries Canal sent a second
        time (see the Consumer) can end before one acked earlier.
        """
        with self._changed:
            last = self.last
            known = last.position if last is not None else None
            now = later(known, position)
            if now != known:
                self.last = Ack(now, int(time.time() * 1000))
            self._changed.notify_all()

    def forget(self) -> None:
        """``canalbridge reset``: no ack is known (the next one may lie anywhere, even on another source)."""
        with self._changed:
            self.last = None

    def wait_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``done()`` holds, looking again at each ack the source confirms."""
        with self._changed:
            return self._changed.wait_for(done, timeout_s)

    def wait_through(self, position: Position, timeout_s: float) -> bool:
        """Wait until Canal confirmed an ack at or after ``position``."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self.last is not None and self.last.position >= position, timeout_s
            )

    @property
    def position(self) -> Position | None:
        last = self.last
        return last.position if last else None

    def position_info(self) -> str:
        last = self.last
        return format_position_info(last.position if last else None, last.time_ms if last else None)


def format_position_info(position: Position | None, ack_time_ms: int | None) -> str:
    """Doris's status string: position, execute time, delay between execution and ack, gtid."""
    if position is None:
        return "position:N/A"
    execute = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(position.execute_time_ms / 1000))
    text = f"position:[{position}], executeTime:[{execute}]"
    if ack_time_ms is not None:
        text += f", delay:{max(ack_time_ms - position.execute_time_ms, 0)}ms"
    if position.gtid:
        text += f", gtid({position.gtid})"
    return text


class CommittedPositions:
    """Each channel's last committed position: the point up to which it skips replayed entries.

    Owned by the job; the Consumer advances it after commits and when a
    target reports what it holds. Within a run a position only moves
    forward; a run starts from what each target holds.
    """

    def __init__(self) -> None:
        self._positions: dict[str, Position] = {}

    def get(self, source: str) -> Position | None:
        return self._positions.get(source)

    def advance(self, source: str, position: Position | None) -> None:
        if position is not None:
            self._positions[source] = later(self._positions.get(source), position)

    def forget(self, source: str) -> None:
        """``canalbridge reset``: the channel's target no longer holds a position."""
        self._positions.pop(source, None)

    def read_back(self, source: str, position: Position | None) -> None:
        """What the channel's target holds as its run starts: it wins, even if earlier (a table emptied or
        rolled back since must be written again); no commit of an earlier run is in flight then."""
        self.forget(source)
        self.advance(source, position)

    def as_dict(self) -> dict[str, Position]:
        return dict(self._positions)
