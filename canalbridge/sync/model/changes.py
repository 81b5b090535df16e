"""The change vocabulary between the sync core and a writer: what happened to a row, in target column order.

A closed set of kinds, named after Flink's row kinds, so that no writer
needs Canal's protobuf enums to know what a row means. An UPDATE arrives as
an ``UPDATE_BEFORE`` (the old image) followed by an ``UPDATE_AFTER``; a
writer says through :class:`BeforeImages` how much of the old images it
needs, and the mapper reads no more than that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from canalbridge.source_db.chunks import KeyRange
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.schema.ddl import SchemaChange
from canalbridge.sync.snapshot.progress import TableProgress


class ChangeKind(Enum):
    """What a row does to its table; the values are the changelog's ``_op`` codes."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    @property
    def removes(self) -> bool:
        """Whether the row's key leaves the table (a delete, or the old image of an update)."""
        return self is ChangeKind.DELETE or self is ChangeKind.UPDATE_BEFORE


class BeforeImages(Enum):
    """How much of the old images (deletes, updates' before images) a writer needs."""

    #: the key columns only, and an UPDATE_BEFORE only when the update changed the key:
    #: enough for a target that keeps the last row per key (reading every cell is the
    #: costliest part of decoding)
    KEY_CHANGES = "key_changes"
    #: every before image, whole: a changelog keeps them all
    FULL = "full"


@dataclass(frozen=True)
class SourceColumn:
    """Type facts of a source column, as Canal describes it (for typed conversion)."""

    name: str
    mysql_type: str
    sql_type: int
    is_key: bool


class ChangeRow(NamedTuple):
    """One row change in target column order; values are MySQL's text form, None for NULL.

    A NamedTuple rather than a frozen dataclass: one is built per row, and a
    frozen dataclass's __init__ costs about three times as much.
    """

    kind: ChangeKind
    values: tuple[str | None, ...]
    position: Position


class RowRun:
    """Row-change entries of one table in stream order, as columns: a table's share of a batch, handed to its
    channel in one call, and what a writer that decodes RowChange bytes itself receives.

    Columns rather than an object per entry: the Consumer fills them straight
    from the entries' headers, and the Spark writer stages them as they are.
    An entry's position is rebuilt from its columns when asked for
    (:meth:`position`), unless the run keeps positions (a Kafka position is
    not a binlog one). One thread appends; once handed on, a run is only read.
    """

    __slots__ = ("execute_times", "gtids", "journals", "offsets", "positions", "row_changes", "rows", "table")

    def __init__(self, table: TableId, *, keeps_positions: bool = False) -> None:
        self.table = table  # (schema, table) as the headers name it: a merged channel's shard, a renamed table
        self.journals: list[str] = []
        self.offsets: list[int] = []
        self.execute_times: list[int] = []
        self.gtids: list[str] = []
        self.row_changes: list[bytes] = []
        self.rows: list[int] = []  # each entry's rowsCount; 0 when Canal did not say
        self.positions: list[Position] | None = [] if keeps_positions else None

    def add(self, position: Position, row_change: bytes, rows: int = 0) -> None:
        """Append one entry (the positions it keeps, if it keeps any)."""
        self.journals.append(position.journal)
        self.offsets.append(position.offset)
        self.execute_times.append(position.execute_time_ms)
        self.gtids.append(getattr(position, "gtid", ""))
        self.row_changes.append(row_change)
        self.rows.append(rows)
        if self.positions is not None:
            self.positions.append(position)

    def __len__(self) -> int:
        return len(self.row_changes)

    def position(self, index: int) -> Position:
        """The position of the entry at ``index`` (negative counts from the end)."""
        if self.positions is not None:
            return self.positions[index]
        return EntryPosition(self.journals[index], self.offsets[index], self.execute_times[index],
                             self.gtids[index])

    @property
    def last(self) -> Position:
        return self.position(-1)

    def piece(self, start: int, stop: int) -> RowRun:
        """The entries from ``start`` up to ``stop``: the run itself if that is all of it."""
        if start == 0 and stop >= len(self):
            return self
        return self._taking(lambda values: values[start:stop])

    def without(self, skipped: list[int]) -> RowRun:
        """The run less the entries at the indexes ``skipped``."""
        drop = set(skipped)
        keep = [index for index in range(len(self)) if index not in drop]
        return self._taking(lambda values: [values[index] for index in keep])

    def _taking(self, take: Callable[[list[Any]], list[Any]]) -> RowRun:
        """A run of the same table with ``take`` of each column (and of the positions it keeps)."""
        run = RowRun(self.table, keeps_positions=self.positions is not None)
        for name in self.__slots__:
            values = getattr(self, name)
            if name != "table" and values is not None:
                setattr(run, name, take(values))
        return run

    @property
    def row_count(self) -> int:
        """The rows the entries change, counting an entry whose count Canal did not say as one."""
        return sum(self.rows) + self.rows.count(0)


@dataclass(frozen=True)
class RawBatch:
    """Row changes of one table still as RowChange bytes, for a writer that decodes them itself.

    The column facts are :class:`RowBatch`'s, learnt from the table's first
    rows; the writer must fail the commit with :class:`ColumnsChangedError`
    (:mod:`canalbridge.sync.errors`) on a RowChange whose columns differ.
    """

    table: str
    target_columns: tuple[str, ...]
    columns: tuple[SourceColumn, ...]
    key_indexes: tuple[int, ...]
    changes: RowRun


@dataclass(frozen=True)
class RowBatch:
    """Rows of one table in target column order, with the source columns they came from."""

    table: str
    target_columns: tuple[str, ...]
    columns: tuple[SourceColumn, ...]
    key_indexes: tuple[int, ...]
    rows: tuple[ChangeRow, ...]


@dataclass(frozen=True)
class ChunkBatch:
    """A snapshot chunk of one table, with the column facts of :class:`RowBatch`, for a writer to apply at
    ``position`` (its close signal's) in the open transaction: after the rows sent before it, before those
    sent after it.

    ``rows`` is the writer's own handle on the chunk's rows (see
    :class:`~canalbridge.sync.snapshot.chunk_window.SnapshotChunk`): the source
    columns' values as the stream's conversion takes them (Canal's text,
    or the value itself), to which each row adds the ``origin`` values (a
    merged target's columns that record its source). Each row goes in as the
    row of its key, except the keys in ``dropped`` (Canal's text, in the
    order of ``key_indexes``): the stream changed them while the chunk was
    read, and its changes stand. ``progress`` is committed with the chunk.
    ``span``: the keys the chunk's read took whole (None: a mark, which read
    nothing); unless ``progress`` has a filter, a target row in it that the
    chunk lacks and the window did not note is one the source lacks.
    """

    table: str
    target_columns: tuple[str, ...]
    columns: tuple[SourceColumn, ...]
    key_indexes: tuple[int, ...]
    rows: object
    count: int
    origin: tuple[str | None, ...]
    dropped: frozenset[tuple[str | None, ...]]
    position: Position
    progress: TableProgress
    span: KeyRange | None = None


@dataclass(frozen=True)
class Alteration:
    """A DDL's changes to one source table's columns, for its writer to apply where the stream has it.

    ``position`` is the DDL's. With ``drop_columns`` a ``DROP COLUMN`` drops
    the target's column; without, the column stays, NULL in new rows.
    ``shared``: the target is several shards', and each shard runs the same
    DDL in turn; what the target already shows is applied (the column is
    there, renamed, as wide), and a narrower type leaves the wider one.
    ``aliases``: a shared target's column aliases as the step leaves them
    (see :class:`~canalbridge.sync.channel.sink.TargetState`), as (source name,
    target column) pairs, computed by the channel for the sink's schema
    applier to record; None on any other target.
    """

    table: str
    sql: str
    changes: tuple[SchemaChange, ...]
    position: Position
    drop_columns: bool = False
    shared: bool = False
    aliases: tuple[tuple[str, str], ...] | None = None
