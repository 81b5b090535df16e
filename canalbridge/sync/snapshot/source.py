"""Where a job's snapshot and verify meet the source and the targets: the source database's connections, the
chunk reader (the rows, read as the stream's conversion takes them) and the comparer of a target with rows
read. The daemon makes them from the job's ``[job.snapshot]`` and its Spark session; the tests, from fakes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from canalbridge.source_db import KeyRange, SourceDb, TableKey
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.snapshot.chunk_window import CanalKey
from canalbridge.sync.snapshot.progress import TableProgress


class ReaderLostError(Exception):
    """A chunk reader's own engine went away during a read (a Spark JVM that died): the read is tried again, as
    a read the source's loss broke is."""


@dataclass(frozen=True)
class ReadRows:
    """A chunk's rows as a reader holds them (read once: its handle never reads the source again), and how many."""

    handle: object
    count: int


class ChunkReader(Protocol):
    """Reads a chunk of a table as the stream's rows are converted: Canal's text, or the value where the reader
    reads it as the value that conversion gives."""

    def read(self, key: TableKey, columns: Sequence[SourceColumn], ranges: Sequence[KeyRange],
             where: str | None = None) -> ReadRows:
        """The rows of ``key``'s table in ``ranges`` that ``where`` takes (None: all), each as its ``columns``'
        values; no range: none. :class:`ReaderLostError` if the reader's engine went away meanwhile."""

    def release(self, rows: object) -> None:
        """Drop what :meth:`read` holds, once its chunk landed (or was given up)."""

    def holds(self, rows: object) -> bool:
        """Whether what :meth:`read` gave still holds every row it read (a Spark JVM that died, or an executor
        lost with its blocks, lost them: the chunk is read again)."""


@dataclass(frozen=True)
class Differing:
    """What a comparison found in a chunk: how many keys differ, and some of them (each key's values as text)."""

    keys: int
    sample: tuple[str, ...] = ()


class TargetComparer(Protocol):
    """Compares a target with rows read from its source (the daemon's is Spark's, over the Iceberg table)."""

    def differing(self, target: str, key: TableKey, columns: Sequence[SourceColumn], ranges: Sequence[KeyRange],
                  rows: object, noted: Callable[[], frozenset[CanalKey]], sample: int) -> Differing:
        """The keys in ``ranges`` whose row in ``target`` differs from its row in ``rows`` (a reader's handle:
        ``columns``' values as the stream's conversion takes them), or is in one and not the other, leaving out
        the keys ``noted()`` gives. ``noted`` is called once the target's state to compare is fixed (every change
        that state holds since the window opened is noted by then)."""


class FilterLedger(Protocol):
    """Where the daemon keeps each back-fill's condition as the user gave it, so that a condition read back from
    a target (whose snapshot summary anyone who can commit to the table can write) runs on the source only if
    it is one the user asked for."""

    def remember(self, job: str, progress: TableProgress) -> None:
        """``progress`` (a back-fill's: its ``where`` is set) is about to land: its condition is the user's."""

    def knows(self, job: str, progress: TableProgress) -> bool:
        """Whether ``progress``'s snapshot and condition are those :meth:`remember` was given for its table."""


@dataclass(frozen=True)
class SnapshotSource:
    """Where a job's snapshot reads: connections to the source database (keys, plans, signals) and the chunk
    reader (the rows); and, for ``canalbridge verify``, what compares a target with rows read (None: no verify).
    The daemon makes it from the job's ``[job.snapshot]``."""

    connect: Callable[[], SourceDb]
    reader: ChunkReader
    comparer: TargetComparer | None = None
    # What a target's newest commit of the job says of each source table's snapshot (by ``schema.table``), for
    # the tables rules take, whose channels are not open yet (None: those are not snapshotted).
    progress: Callable[[str], Mapping[str, TableProgress]] | None = None
    # The back-fill conditions the user asked for (None: every condition a target holds is taken as asked for).
    filters: FilterLedger | None = None
