"""Binlog positions, batch ranges, and the consumer's position bookkeeping.

Positions are totally ordered by (binlog journal, offset). Journal names are
compared by their numeric suffix when they have one (``mysql-bin.000010``
after ``mysql-bin.000009`` even if a file ever has more digits), and the
comparison never narrows a number (Doris cast a long difference to int).
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass, field

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

_JOURNAL_RE = re.compile(r"^(.*?)(\d+)$")


@functools.lru_cache(maxsize=4096)  # every entry compares positions; a binlog has few file names
def journal_key(journal: str) -> tuple[str, int, str]:
    """Sort key for a binlog file name: prefix, then the number it ends with."""
    match = _JOURNAL_RE.match(journal)
    if match is None:
        return (journal, -1, journal)
    return (match.group(1), int(match.group(2)), journal)


@dataclass(frozen=True)
class EntryPosition:
    """Where an entry sits in the binlog, with its execute time and gtid."""

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

    def __lt__(self, other: EntryPosition) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: EntryPosition) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: EntryPosition) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: EntryPosition) -> bool:
        return self.sort_key >= other.sort_key

    def same_place(self, other: EntryPosition) -> bool:
        return self.sort_key == other.sort_key

    def __str__(self) -> str:
        return f"{self.journal}:{self.offset}"


@dataclass(frozen=True)
class PositionRange:
    """The first and last position of a batch."""

    start: EntryPosition
    end: EntryPosition


@dataclass(frozen=True)
class OutstandingBatch:
    """A batch taken from Canal and not yet acked."""

    batch_id: int
    range: PositionRange
    entries: int
    raw_size: int


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


@dataclass
class PositionMeta:
    """What the consumer knows about positions; owned by the consumer thread.

    Outstanding batches are kept oldest first, because Canal accepts acks
    only in that order. ``committed`` holds each channel's last committed
    position, the point before which it skips replayed entries.
    """

    outstanding: list[OutstandingBatch] = field(default_factory=list)
    ack_position: EntryPosition | None = None
    ack_time_ms: int | None = None
    committed: dict[str, EntryPosition] = field(default_factory=dict)

    def add_batch(self, batch: OutstandingBatch) -> None:
        if self.outstanding and batch.batch_id <= self.outstanding[-1].batch_id:
            raise ValueError(
                f"batch {batch.batch_id} is not newer than outstanding batch {self.outstanding[-1].batch_id}"
            )
        self.outstanding.append(batch)

    def ackable_through(self, position: EntryPosition) -> list[OutstandingBatch]:
        """The oldest outstanding batches that lie wholly at or before ``position``."""
        ready = []
        for batch in self.outstanding:
            if batch.range.end > position:
                break
            ready.append(batch)
        return ready

    def mark_acked(self, batches: list[OutstandingBatch], ack_time_ms: int) -> None:
        if not batches:
            return
        assert self.outstanding[: len(batches)] == batches, "acks must follow Canal's batch order"
        del self.outstanding[: len(batches)]
        self.ack_position = batches[-1].range.end
        self.ack_time_ms = ack_time_ms

    def clear_outstanding(self) -> None:
        self.outstanding.clear()

    @property
    def outstanding_entries(self) -> int:
        return sum(batch.entries for batch in self.outstanding)

    @property
    def outstanding_bytes(self) -> int:
        return sum(batch.raw_size for batch in self.outstanding)

    def position_info(self) -> str:
        return format_position_info(self.ack_position, self.ack_time_ms)
