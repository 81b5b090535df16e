"""Canal's RowChange turned into the change vocabulary (:mod:`canalbridge.sync.model.changes`).

The one module that knows Canal's RowChange layout. INSERT gives its after
image; DELETE its before image; UPDATE an UPDATE_BEFORE and an
UPDATE_AFTER, the before image always when the primary key changed (Doris
wrote only the after image and left the old row behind) and otherwise only
when the writer wants every before image. Source columns map onto target
columns by an explicit list, or else by name onto the target's own columns
(the target may have more: columns a DDL dropped and the target kept).
A DDL that changes the columns (:meth:`RowMapper.alter`) makes the mapper
learn the next row afresh, and that row must have the columns the DDL
leaves. A row that does not fit is a :class:`RowMappingError` naming the
table, the position and the last DDL seen for the table: a column count or
names that differ from the target, or columns (names or MySQL types) that
differ from the rows before it with no DDL that says so.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from canalbridge.mysql_types import canonical
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import RowMappingError
from canalbridge.sync.model.changes import (
    Alteration,
    BeforeImages,
    ChangeKind,
    ChangeRow,
    ChunkBatch,
    RawBatch,
    RowBatch,
    RowRun,
    SourceColumn,
)
from canalbridge.sync.model.position import Position
from canalbridge.sync.schema.ddl import columns_after
from canalbridge.sync.snapshot.chunk_window import CanalKey, SnapshotChunk

EventType = entry_pb.EventType
# The columns that record a row's source schema and table: MySQL's names are at most 64 characters.
ORIGIN_TYPE = "varchar(64)"
ORIGIN_SQL_TYPE = 12  # java.sql.Types.VARCHAR, as Canal gives a varchar
_INSERT, _UPDATE, _DELETE = int(EventType.INSERT), int(EventType.UPDATE), int(EventType.DELETE)
#: the event types of a ROWDATA entry that carries row changes (any other carries a statement: see is_ddl)
DML_EVENTS = frozenset({_INSERT, _UPDATE, _DELETE})
_INSERTED, _DELETED = ChangeKind.INSERT, ChangeKind.DELETE
_BEFORE, _AFTER = ChangeKind.UPDATE_BEFORE, ChangeKind.UPDATE_AFTER


class RowMapper:
    """Maps one source table's row changes onto a target's columns.

    ``target_columns`` is the explicit mapping (target names, one per source
    column, in source order) or, without one (``by_name``), the target
    table's columns, which must include every source column's name.
    ``key_columns`` overrides the source's primary key when given.
    ``before_images`` is what the writer asked for: with ``KEY_CHANGES``
    only the key columns of before images are read (the others left None)
    and a key-keeping UPDATE gives its after image alone. ``origin`` are
    (target column, value) pairs every row gets after its own columns (the
    source schema and table of a merged channel's shard), part of the key
    with ``origin_in_key``.
    """

    def __init__(
        self,
        table: str,
        target_columns: Sequence[str] | None,
        key_columns: Sequence[str] | None = None,
        *,
        before_images: BeforeImages = BeforeImages.FULL,
        by_name: bool = False,
        origin: Sequence[tuple[str, str]] = (),
        origin_in_key: bool = False,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self.table = table
        self._aliases = dict(aliases or {})  # a source name (lower case) -> the target column it went to
        self._origin_names = tuple(name for name, _ in origin)
        self._origin_values: tuple[str | None, ...] = tuple(value for _, value in origin)
        self._origin_in_key = origin_in_key
        self.by_name = by_name
        self.key_only_before = before_images is BeforeImages.KEY_CHANGES
        self.target_columns = tuple(target_columns) if target_columns is not None else None
        self.key_columns = tuple(key_columns) if key_columns else None
        self._columns: tuple[SourceColumn, ...] | None = None
        # (name, canonical mysqlType, isKey) of the rows so far: a row whose key flags differ is keyed otherwise.
        self._signature: tuple[tuple[str, str, bool], ...] | None = None
        self._last_ddl: tuple[str, Position] | None = None
        self._ddl_unread: str | None = None  # why the last DDL could not be read, if it could not
        self._expected: tuple[str, ...] | None = None  # the columns the last DDLs leave, for the next row
        self._source_names: tuple[str, ...] | None = None  # the source's columns, as rows and DDLs told them
        self._key_indexes: tuple[int, ...] | None = None
        self._names: tuple[str, ...] | None = None  # the rows' column names, as the target spells them
        self._key_getter: Callable[[tuple[str | None, ...]], object] = lambda values: values

    @property
    def columns(self) -> tuple[SourceColumn, ...] | None:
        """Source column facts, known once the first row has been seen."""
        return self._columns

    @property
    def key_indexes(self) -> tuple[int, ...]:
        assert self._key_indexes is not None, "no row seen yet"
        return self._key_indexes

    def map(self, change: entry_pb.RowChange, position: Position) -> list[ChangeRow]:
        """The target rows for one RowChange (DDL and non-DML changes give none)."""
        if change.isDdl:
            self._last_ddl = (change.sql, position)  # named if a later row no longer fits
            self._ddl_unread = None
            return []
        event_type = change.eventType
        rows: list[ChangeRow] = []
        if change.rowDatas:
            first = change.rowDatas[0]
            self._check_shape(first.afterColumns or first.beforeColumns, position)  # one table map per change
        for row_data in change.rowDatas:
            if event_type == _INSERT:
                rows.append(ChangeRow(_INSERTED, self._values(row_data.afterColumns, position), position))
            elif event_type == _DELETE:
                rows.append(ChangeRow(_DELETED, self._before(row_data.beforeColumns, position), position))
            elif event_type == _UPDATE:
                before = self._before(row_data.beforeColumns, position)
                after = self._values(row_data.afterColumns, position)
                if not self.key_only_before or self._key_getter(before) != self._key_getter(after):
                    rows.append(ChangeRow(_BEFORE, before, position))
                rows.append(ChangeRow(_AFTER, after, position))
        return rows

    def _values(self, columns: Sequence[entry_pb.Column], position: Position) -> tuple[str | None, ...]:
        if self._columns is None or len(columns) + len(self._origin_values) != len(self._columns):
            self._learn(columns, position)
        if self._origin_values:
            return tuple([None if column.isNull else column.value for column in columns]) + self._origin_values
        return tuple([None if column.isNull else column.value for column in columns])

    def _before(self, columns: Sequence[entry_pb.Column], position: Position) -> tuple[str | None, ...]:
        if not self.key_only_before:
            return self._values(columns, position)
        if self._columns is None or len(columns) + len(self._origin_values) != len(self._columns):
            self._learn(columns, position)
        count = len(columns)
        values: list[str | None] = [None] * count
        values += self._origin_values
        for index in self.key_indexes:
            if index < count:
                column = columns[index]
                values[index] = None if column.isNull else column.value
        return tuple(values)

    def alter(self, alteration: Alteration) -> None:
        """The DDL just mapped changes the columns: learn the next row afresh, which must have what it leaves."""
        if self._source_names is not None:  # (several DDLs in a row each take the last one's result)
            self._source_names = self._expected = columns_after(self._source_names, alteration.changes)
        if self.by_name and self.target_columns is not None:
            self.target_columns = columns_after(self.target_columns, alteration.changes,
                                                drop=alteration.drop_columns)
        self._columns = self._signature = None

    def retarget(self, target_columns: Sequence[str], aliases: Mapping[str, str]) -> None:
        """The target's columns as a DDL (on this table or another shard of its target) leaves them, and the
        names another shard's rename took from it: this table's rows still use the old one until its own
        DDL, and their values go to the renamed column. The next row learns its names afresh."""
        if self.by_name:
            self.target_columns = tuple(target_columns)
            self._aliases = dict(aliases)
            self._columns = None

    def unread_ddl(self, reason: str) -> None:
        """The DDL just mapped could not be read: a later row whose columns differ names why."""
        self._ddl_unread = reason

    def _check_shape(self, columns: Sequence[entry_pb.Column], position: Position) -> None:
        source_key = self.key_columns is None  # (a channel with its own key does not care about Canal's)
        signature = tuple([(c.name, canonical(c.mysqlType), source_key and c.isKey) for c in columns])
        if signature == self._signature:
            return
        if self._signature is not None:
            raise self.columns_changed(column_signature(signature), len(signature), position)
        if self._expected is not None:
            names = [name for name, _, _ in signature]
            if [n.lower() for n in names] != [n.lower() for n in self._expected]:
                raise self._error(f"the row's columns ({', '.join(names)}) are not the ones the DDL leaves "
                                  f"({', '.join(self._expected)})", position)
            self._expected = None
        self._learn(columns, position)
        self._signature = signature

    def history(self) -> ColumnsHistory:
        """What this table's rows and DDLs were so far, as a value another thread may keep."""
        return ColumnsHistory(self.table, self._signature, self._last_ddl, self._ddl_unread)

    def columns_changed(self, now: str, count: int, position: Position) -> RowMappingError:
        """The error for a row whose ``count`` columns (``now``, as :func:`column_signature` gives them)
        are not the earlier rows'."""
        return self.history().columns_changed(now, count, position)

    def _error(self, message: str, position: Position) -> RowMappingError:
        return self.history().error(message, position)

    def _learn(self, columns: Sequence[entry_pb.Column], position: Position) -> None:
        """Check the row's shape against the target and remember its column facts."""
        names = [c.name for c in columns]
        if self.target_columns is not None and not self.by_name and len(columns) != len(self.target_columns):
            raise self._error(
                f"row has {len(columns)} columns but the target has {len(self.target_columns)} "
                f"({', '.join(self.target_columns)}); the row's: {', '.join(names)}",
                position,
            )
        names += self._origin_names
        if self.by_name and self.target_columns is not None:
            spelled = {n.lower(): n for n in self.target_columns}
            for old, new in self._aliases.items():
                if old not in spelled and new.lower() in spelled:
                    spelled[old] = spelled[new.lower()]
            missing = [n for n in names if n.lower() not in spelled]
            if missing:
                raise self._error(
                    f"row columns ({', '.join(names)}) are not the target's ({', '.join(self.target_columns)}): "
                    f"the target has no {', '.join(missing)}",
                    position,
                )
            names = [spelled[n.lower()] for n in names]  # as the target spells them
        if self._columns is not None and len(columns) + len(self._origin_names) != len(self._columns):
            earlier = len(self._columns) - len(self._origin_names)
            raise self._error(f"row has {len(columns)} columns, earlier rows had {earlier}", position)
        self._columns = tuple(SourceColumn(c.name, c.mysqlType, c.sqlType, c.isKey) for c in columns) + tuple(
            SourceColumn(name, ORIGIN_TYPE, ORIGIN_SQL_TYPE, False) for name in self._origin_names)
        self._source_names = tuple(c.name for c in columns)
        self._names = tuple(names)
        target_names = self.output_columns()
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
        if self._origin_in_key:
            count = len(self._columns)
            self._key_indexes += tuple(i for i in range(count - len(self._origin_names), count)
                                       if i not in self._key_indexes)
        self._key_getter = operator.itemgetter(*self._key_indexes)  # C speed: runs for every UPDATE

    def output_columns(self) -> tuple[str, ...]:
        """Target column names in the order of :attr:`ChangeRow.values`."""
        if self.target_columns is not None and not self.by_name:
            return self.target_columns
        assert self._names is not None, "no row seen yet"
        return self._names

    def batch(self, rows: list[ChangeRow]) -> RowBatch:
        """Wrap mapped rows with the column facts a writer needs."""
        assert self._columns is not None and self._key_indexes is not None
        return RowBatch(self.table, self.output_columns(), self._columns, self._key_indexes, tuple(rows))

    def chunk_batch(self, chunk: SnapshotChunk, key_columns: Sequence[str], dropped: Iterable[CanalKey],
                    position: Position) -> ChunkBatch:
        """A snapshot chunk as its writer takes it, at ``position``: its columns must be the rows' (a chunk read
        before any row teaches them). ``dropped`` are the keys its window noted, by ``key_columns``."""
        self._check_shape([entry_pb.Column(name=c.name, mysqlType=c.mysql_type, sqlType=c.sql_type, isKey=c.is_key)
                           for c in chunk.columns], position)
        assert self._columns is not None and self._key_indexes is not None
        if chunk.span is None and not chunk.count:  # a mark of progress: no row, no range (its key may be none)
            return ChunkBatch(self.table, self.output_columns(), self._columns, self._key_indexes, chunk.rows,
                              chunk.count, self._origin_values, frozenset(), position, chunk.progress, None)
        source = len(chunk.columns)
        names = [name.lower() for name in key_columns]
        order: list[int] = []  # where each of the target's key values is in a window's key; -1: an origin value
        for index in self._key_indexes:
            name = self._columns[index].name.lower()
            if index < source and name not in names:
                raise self._error(f"the snapshot's key ({', '.join(key_columns)}) does not hold the column "
                                  f"{self._columns[index].name} of the channel's key", position)
            order.append(names.index(name) if index < source else -1 - (index - source))
        origin = self._origin_values
        keys = frozenset(tuple(key[at] if at >= 0 else origin[-1 - at] for at in order) for key in dropped)
        return ChunkBatch(self.table, self.output_columns(), self._columns, self._key_indexes, chunk.rows,
                          chunk.count, origin, keys, position, chunk.progress, chunk.span)

    def raw_batch(self, changes: RowRun) -> RawBatch:
        """Wrap undecoded row changes with the column facts learnt so far (a row must have been mapped)."""
        assert self._columns is not None and self._key_indexes is not None
        return RawBatch(self.table, self.output_columns(), self._columns, self._key_indexes, changes)


@dataclass(frozen=True)
class ColumnsHistory:
    """What one source table's rows and DDLs were so far: enough to name a row that no longer fits them."""

    table: str
    signature: tuple[tuple[str, str, bool], ...] | None  # (name, canonical mysqlType, isKey) of the rows so far
    last_ddl: tuple[str, Position] | None  # (sql, position)
    ddl_unread: str | None  # why the last DDL could not be read, if it could not

    def columns_changed(self, now: str, count: int, position: Position) -> RowMappingError:
        """The error for a row whose ``count`` columns (``now``, as :func:`column_signature` gives them)
        are not the earlier rows'."""
        earlier = self.signature or ()
        was = column_signature(earlier)
        if count != len(earlier):
            return self.error(f"row has {count} columns ({now}), earlier rows had {len(earlier)} ({was})", position)
        if _unkeyed(was) == _unkeyed(now):
            # Upserts keyed by the old key would collapse rows the new key tells apart: never go on silently.
            return self.error(f"the source's primary key changed: the row's columns are ({now}), earlier rows' "
                              f"({was}); canalbridge follows a key change only through the DDL that makes it "
                              f"(docs/guide/schema-changes.md#primary-key)", position)
        return self.error(f"the row's columns changed from ({was}) to ({now})", position)

    def error(self, message: str, position: Position) -> RowMappingError:
        """A mapping error for this table, naming the last DDL (and why it could not be read, if so)."""
        if self.last_ddl is not None:
            sql, at = self.last_ddl
            message += f", after the DDL {sql!r} at {at}"
            if self.ddl_unread is not None:
                message += f" (canalbridge could not read that DDL: {self.ddl_unread})"
        return RowMappingError(self.table, message, position)


def column_signature(columns: Sequence[tuple[str, str, bool]]) -> str:
    """Columns as errors and the JVM decoder describe a row's: ``name mysqlType``, then `` key`` for a column of
    the primary key, joined by ``, ``."""
    return ", ".join(f"{name} {mysql_type}{KEY_MARK if is_key else ''}" for name, mysql_type, is_key in columns)


KEY_MARK = " key"  # (RowChangeDecoder.java writes the same)


def _unkeyed(signature: str) -> str:
    return ", ".join(part.removesuffix(KEY_MARK) for part in signature.split(", "))


def is_ddl(store_value: bytes) -> bool:
    """Whether a ROWDATA entry of a non-DML event type carries a statement that stands alone.

    Canal flags a DDL (and any other statement it parsed from a query event)
    ``isDdl``; the annotated SQL of a row event (MariaDB's Annotate_rows,
    MySQL's Rows_query) comes as event type QUERY without the flag, and
    belongs to the transaction whose rows follow it.
    """
    return entry_pb.RowChange.FromString(store_value).isDdl


def rows_count(header: entry_pb.Header) -> int:
    """The row changes a rows event carries, from its header's ``rowsCount`` prop (0 without one)."""
    for prop in header.props:
        if prop.key == "rowsCount":
            return int(prop.value)
    return 0
