"""The change vocabulary between the sync core and a writer: what happened to a row, in target column order.

A closed set of kinds, named after Flink's row kinds, so that no writer
needs Canal's protobuf enums to know what a row means. An UPDATE arrives as
an ``UPDATE_BEFORE`` (the old image) followed by an ``UPDATE_AFTER``; a
writer says through :class:`BeforeImages` how much of the old images it
needs, and the mapper reads no more than that.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from canalbridge.source_db.chunks import KeyRange
from canalbridge.sync.model.position import Position
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


class RawChange(NamedTuple):
    """One DML entry's RowChange as Canal sent it, with the entry's position (a NamedTuple: one per entry)."""

    position: Position
    row_change: bytes
    rows: int = 0  # the entry's rowsCount; 0 when Canal did not say


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
    changes: tuple[RawChange, ...]


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
