"""Turn Canal row changes into the rows a channel writes.

INSERT writes the after image; DELETE writes the before image flagged as a
delete; UPDATE writes the after image, and when the primary key changed it
first deletes the old key (Doris wrote only the after image and left the
old row behind). Source columns map onto target columns by an explicit
list, or else by position; a row whose column count does not match is a
:class:`RowMappingError` naming the table, the counts and the position.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import RowMappingError
from canalbridge.sync.position import EntryPosition

EventType = entry_pb.EventType
_INSERT, _UPDATE, _DELETE = int(EventType.INSERT), int(EventType.UPDATE), int(EventType.DELETE)


class Op(Enum):
    """What a row does to its target."""

    UPSERT = "upsert"
    DELETE = "delete"


@dataclass(frozen=True)
class SourceColumn:
    """Type facts of a source column, as Canal describes it (for typed conversion)."""

    name: str
    mysql_type: str
    sql_type: int
    is_key: bool


class ChangeRow(NamedTuple):
    """One row change in target column order; values are Canal text, None for NULL.

    ``before`` is the before image of an UPDATE that kept its key (changelog
    mode writes it); an UPDATE that changed the key arrives as a DELETE of
    the old row and an UPSERT of the new one, both with event type UPDATE.
    A NamedTuple rather than a frozen dataclass: one is built per row, and
    a frozen dataclass's __init__ costs about three times as much.
    """

    op: Op
    values: tuple[str | None, ...]
    position: EntryPosition
    event_type: int
    before: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class RowBatch:
    """Rows of one table in target column order, with the source columns they came from."""

    table: str
    target_columns: tuple[str, ...]
    columns: tuple[SourceColumn, ...]
    key_indexes: tuple[int, ...]
    rows: tuple[ChangeRow, ...]


class RowMapper:
    """Maps one source table's row changes onto a target's columns.

    ``target_columns`` is the explicit mapping (target names, one per source
    column, in source order) or, without one, the target table's columns in
    order. ``key_columns`` overrides the source's primary key when given.
    With ``key_only_before`` only the key columns of before images (deleted
    rows, updated rows' old versions) are read, the others left None: an
    upsert target deletes and overwrites by key, and reading every cell is
    the costliest part of decoding. A changelog needs them whole.
    """

    def __init__(
        self,
        table: str,
        target_columns: Sequence[str] | None,
        key_columns: Sequence[str] | None = None,
        *,
        key_only_before: bool = False,
    ) -> None:
        self.table = table
        self.key_only_before = key_only_before
        self.target_columns = tuple(target_columns) if target_columns is not None else None
        self.key_columns = tuple(key_columns) if key_columns else None
        self._columns: tuple[SourceColumn, ...] | None = None
        self._key_indexes: tuple[int, ...] | None = None
        self._key_getter: Callable[[tuple[str | None, ...]], object] = lambda values: values

    @property
    def columns(self) -> tuple[SourceColumn, ...] | None:
        """Source column facts, known once the first row has been seen."""
        return self._columns

    @property
    def key_indexes(self) -> tuple[int, ...]:
        assert self._key_indexes is not None, "no row seen yet"
        return self._key_indexes

    def map(self, change: entry_pb.RowChange, position: EntryPosition) -> list[ChangeRow]:
        """The target rows for one RowChange (DDL and non-DML changes give none)."""
        if change.isDdl:
            return []
        event_type = change.eventType
        rows: list[ChangeRow] = []
        for row_data in change.rowDatas:
            if event_type == _INSERT:
                rows.append(ChangeRow(Op.UPSERT, self._values(row_data.afterColumns, position), position, event_type))
            elif event_type == _DELETE:
                rows.append(ChangeRow(Op.DELETE, self._before(row_data.beforeColumns, position), position, event_type))
            elif event_type == _UPDATE:
                before = self._before(row_data.beforeColumns, position)
                after = self._values(row_data.afterColumns, position)
                if self._key_getter(before) != self._key_getter(after):
                    rows.append(ChangeRow(Op.DELETE, before, position, event_type))
                    rows.append(ChangeRow(Op.UPSERT, after, position, event_type))
                else:
                    kept = None if self.key_only_before else before
                    rows.append(ChangeRow(Op.UPSERT, after, position, event_type, kept))
        return rows

    def _values(self, columns: Sequence[entry_pb.Column], position: EntryPosition) -> tuple[str | None, ...]:
        if self._columns is None or len(columns) != len(self._columns):
            self._learn(columns, position)
        return tuple([None if column.isNull else column.value for column in columns])

    def _before(self, columns: Sequence[entry_pb.Column], position: EntryPosition) -> tuple[str | None, ...]:
        if not self.key_only_before:
            return self._values(columns, position)
        if self._columns is None or len(columns) != len(self._columns):
            self._learn(columns, position)
        values: list[str | None] = [None] * len(columns)
        for index in self.key_indexes:
            column = columns[index]
            values[index] = None if column.isNull else column.value
        return tuple(values)

    def _learn(self, columns: Sequence[entry_pb.Column], position: EntryPosition) -> None:
        """Check the row's shape against the target and remember its column facts."""
        if self.target_columns is not None and len(columns) != len(self.target_columns):
            raise RowMappingError(
                self.table,
                f"row has {len(columns)} columns but the target has {len(self.target_columns)} "
                f"({', '.join(self.target_columns)})",
                position,
            )
        if self._columns is not None and len(columns) != len(self._columns):
            raise RowMappingError(
                self.table, f"row has {len(columns)} columns, earlier rows had {len(self._columns)}", position
            )
        self._columns = tuple(SourceColumn(c.name, c.mysqlType, c.sqlType, c.isKey) for c in columns)
        names = [c.name for c in self._columns]
        target_names = self.target_columns or tuple(names)
        if self.key_columns:
            missing = [k for k in self.key_columns if k not in target_names]
            if missing:
                raise RowMappingError(self.table, f"key column(s) {', '.join(missing)} not in the row", position)
            self._key_indexes = tuple(target_names.index(k) for k in self.key_columns)
        else:
            self._key_indexes = tuple(i for i, c in enumerate(self._columns) if c.is_key)
            if not self._key_indexes:
                raise RowMappingError(
                    self.table, "the source table has no primary key; set `key` for this channel", position
                )
        self._key_getter = operator.itemgetter(*self._key_indexes)  # C speed: runs for every UPDATE

    def output_columns(self) -> tuple[str, ...]:
        """Target column names in the order of :attr:`ChangeRow.values`."""
        if self.target_columns is not None:
            return self.target_columns
        assert self._columns is not None
        return tuple(c.name for c in self._columns)

    def batch(self, rows: list[ChangeRow]) -> RowBatch:
        """Wrap mapped rows with the column facts a writer needs."""
        assert self._columns is not None and self._key_indexes is not None
        return RowBatch(self.table, self.output_columns(), self._columns, self._key_indexes, tuple(rows))
