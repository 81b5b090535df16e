"""Binlog and Kafka positions, batch ranges and acks, as values.

Positions are totally ordered by (binlog journal, offset). Journal names are
compared by their numeric suffix when they have one (``mysql-bin.000010``
after ``mysql-bin.000009`` even if a file ever has more digits), and the
comparison never narrows a number (Doris cast a long difference to int).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
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

    def written_through(self) -> str:
        """The kind of source a target holding this position was written through."""
        return "Canal's TCP protocol (a binlog position)"

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

    def written_through(self) -> str:
        """The kind of source a target holding this position was written through."""
        return "a Kafka topic (partition offsets)"

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


@dataclass(frozen=True)
class Refill:
    """What a channel's target says when its last commit applied entries behind its position: the table
    holds the source through ``through``, except that the entries after ``behind`` were not all applied
    again yet. ``held``: for a changelog, (binlog file, offset) of the changes it holds in that range;
    None for an upsert target, which applies every entry of the range again, in order."""

    behind: Position
    through: Position
    held: frozenset[tuple[str, int]] | None

    def lacks(self, position: Position) -> bool:
        """Whether ``position`` lies in the range and is not a change the target holds."""
        if not self.behind < position <= self.through:
            return False
        return self.held is None or not isinstance(position, EntryPosition) \
            or (position.journal, position.offset) not in self.held
