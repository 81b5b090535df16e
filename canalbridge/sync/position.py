"""Binlog positions, batch ranges, and the consumer's position bookkeeping.

Positions are totally ordered by (binlog journal, offset). Journal names are
compared by their numeric suffix when they have one (``mysql-bin.000010``
after ``mysql-bin.000009`` even if a file ever has more digits), and the
comparison never narrows a number (Doris cast a long difference to int).
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
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

    def append(self, position: EntryPosition) -> None:
        self._journals.append(position.journal)
        self._offsets.append(position.offset)

    def count_from(self, position: EntryPosition) -> int:
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

    position: EntryPosition
    time_ms: int


class AckState:
    """The last ack Canal confirmed. Written by the job's CanalLink only; read by status.

    The value is swapped whole, so a reader never sees a position with
    another ack's time.
    """

    def __init__(self, last: Ack | None = None) -> None:
        self.last = last
        self._changed = threading.Condition()

    def record(self, position: EntryPosition) -> None:
        """Canal confirmed acks through a batch ending at ``position``.

        The position never moves back: a batch of entries Canal sent a second
        time (see the Consumer) can end before one acked earlier.
        """
        with self._changed:
            last = self.last
            if last is None or position > last.position:
                self.last = Ack(position, int(time.time() * 1000))
            self._changed.notify_all()

    def wait_through(self, position: EntryPosition, timeout_s: float) -> bool:
        """Wait until Canal confirmed an ack at or after ``position``."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self.last is not None and self.last.position >= position, timeout_s
            )

    @property
    def position(self) -> EntryPosition | None:
        last = self.last
        return last.position if last else None

    def position_info(self) -> str:
        last = self.last
        return format_position_info(last.position if last else None, last.time_ms if last else None)


def format_position_info(position: EntryPosition | None, ack_time_ms: int | None) -> str:
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
    target reports what it holds. A position only moves forward.
    """

    def __init__(self) -> None:
        self._positions: dict[str, EntryPosition] = {}

    def get(self, source: str) -> EntryPosition | None:
        return self._positions.get(source)

    def advance(self, source: str, position: EntryPosition | None) -> None:
        if position is None:
            return
        known = self._positions.get(source)
        if known is None or position > known:
            self._positions[source] = position

    def as_dict(self) -> dict[str, EntryPosition]:
        return dict(self._positions)
