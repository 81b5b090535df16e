"""Build Canal ``Entry`` messages the way Canal's ``LogEventConvert`` fills them.

A :class:`BinlogWriter` hands out increasing binlog positions (file, offset)
and wraps rows into TRANSACTIONBEGIN / ROWDATA / TRANSACTIONEND entries with
the header fields Canal sets: ``version`` 1, ``serverenCode`` UTF-8,
``sourceType`` MYSQL, ``executeTime`` in ms with second precision, the
event's start offset, ``eventLength``, and in GTID mode the executed GTID
set in ``gtid`` plus the transaction's own GTID in the ``curtGtid`` prop.

Two flavours of source, as real Canal delivers them: MySQL opens each
transaction with a ``BEGIN`` query event (a TRANSACTIONBEGIN entry); MariaDB
has no such event, and Canal sends nothing before the first statement but
the annotated SQL of each rows event, a ROWDATA entry of event type QUERY
with empty schema and table (``canal.instance.filter.query.dml=false``, the
default). Either way the transaction ends with TRANSACTIONEND (the XID).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from canalbridge.devkit.canal_values import render
from canalbridge.mysql_types import MySqlType
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.changes import RowRun
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.schema.rows import rows_count

EntryType = entry_pb.EntryType
EventType = entry_pb.EventType

BINLOG_MAGIC_BYTES = 4  # every binlog file starts with a 4-byte magic number
EVENT_HEADER_BYTES = 19  # MySQL's v4 event header


@dataclass(frozen=True)
class ColumnDef:
    """One column of a source table."""

    name: str
    mysql_type: MySqlType
    is_key: bool = False

    @classmethod
    def of(cls, name: str, declared: str, is_key: bool = False) -> ColumnDef:
        return cls(name, MySqlType.parse(declared), is_key)


@dataclass(frozen=True)
class TableDef:
    """A source table: schema, name and columns (key columns flagged)."""

    schema: str
    name: str
    columns: tuple[ColumnDef, ...]
    table_id: int = 0

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.is_key)


Row = dict[str, object]  # column name -> logical value


class Flavor(Enum):
    """Which server's binlog the entries imitate (see the module docstring)."""

    MYSQL = "mysql"
    MARIADB = "mariadb"


@dataclass
class BinlogWriter:
    """Assigns positions and builds entries for a stream of source transactions."""

    server_id: int = 1
    journal_prefix: str = "mysql-bin"
    max_file_bytes: int = 1 << 30  # MySQL's max_binlog_size default
    gtid_uuid: str | None = None
    flavor: Flavor = Flavor.MYSQL
    clock: Callable[[], float] = time.time
    file_number: int = 1
    offset: int = BINLOG_MAGIC_BYTES
    transactions: int = 0
    _thread_id: int = field(default=1000, repr=False)

    @property
    def journal(self) -> str:
        return f"{self.journal_prefix}.{self.file_number:06d}"

    def _header(self, event_bytes: int, *, schema: str = "", table: str = "",
                event_type: entry_pb.EventType | None = None) -> entry_pb.Header:
        length = EVENT_HEADER_BYTES + event_bytes
        header = entry_pb.Header(
            version=1,
            logfileName=self.journal,
            logfileOffset=self.offset,
            serverId=self.server_id,
            serverenCode="UTF-8",
            executeTime=int(self.clock()) * 1000,
            sourceType=entry_pb.Type.MYSQL,
            schemaName=schema,
            tableName=table,
            eventLength=length,
        )
        if event_type is not None:
            header.eventType = event_type
        if self.gtid_uuid:
            header.gtid = f"{self.gtid_uuid}:1-{self.transactions}"
            header.props.add(key="curtGtid", value=f"{self.gtid_uuid}:{self.transactions}")
        self.offset += length
        return header

    def open(self) -> list[entry_pb.Entry]:
        """Start a transaction: rotate the file if it is full; MySQL's TRANSACTIONBEGIN, or nothing on MariaDB."""
        if self.offset >= self.max_file_bytes:
            self.file_number += 1
            self.offset = BINLOG_MAGIC_BYTES
        self.transactions += 1
        if self.flavor is Flavor.MARIADB:
            self.offset += EVENT_HEADER_BYTES + 26  # the GTID event Canal does not pass on
            return []
        body = entry_pb.TransactionBegin(threadId=self._thread_id).SerializeToString()
        return [entry_pb.Entry(
            header=self._header(len(body) + 30), entryType=EntryType.TRANSACTIONBEGIN, storeValue=body
        )]

    def begin(self) -> entry_pb.Entry:
        """Start a MySQL transaction: its TRANSACTIONBEGIN entry."""
        if self.flavor is not Flavor.MYSQL:
            raise ValueError("only MySQL transactions begin with an entry")
        return self.open()[0]

    def statement(
        self,
        table: TableDef,
        event_type: entry_pb.EventType,
        images: Sequence[tuple[Row | None, Row | None]],
    ) -> list[entry_pb.Entry]:
        """One statement's entries: on MariaDB its annotated SQL, then the rows event."""
        entries = []
        if self.flavor is Flavor.MARIADB:
            verb = entry_pb.EventType.Name(event_type)
            sql = f"/* canalbridge workload */ {verb} `{table.schema}`.`{table.name}` ({len(images)} rows)"
            body = entry_pb.RowChange(eventType=EventType.QUERY, sql=sql).SerializeToString()
            header = self._header(len(body), event_type=EventType.QUERY)
            entries.append(entry_pb.Entry(header=header, entryType=EntryType.ROWDATA, storeValue=body))
        entries.append(self.rows(table, event_type, images))
        return entries

    def end(self) -> entry_pb.Entry:
        """Close the transaction with TRANSACTIONEND carrying the XID."""
        body = entry_pb.TransactionEnd(transactionId=str(self.transactions)).SerializeToString()
        return entry_pb.Entry(
            header=self._header(8), entryType=EntryType.TRANSACTIONEND, storeValue=body
        )

    def rows(
        self,
        table: TableDef,
        event_type: entry_pb.EventType,
        images: Sequence[tuple[Row | None, Row | None]],
    ) -> entry_pb.Entry:
        """One rows event: (before, after) images for INSERT, UPDATE or DELETE."""
        change = entry_pb.RowChange(tableId=table.table_id, eventType=event_type, isDdl=False)
        for before, after in images:
            row_data = change.rowDatas.add()
            before_values = _render(table, before)
            if before_values is not None:
                _fill(row_data.beforeColumns, table, before_values, [False] * len(before_values))
            after_values = _render(table, after)
            if after_values is not None:
                _fill(row_data.afterColumns, table, after_values, _updated_flags(after_values, before_values))
        body = change.SerializeToString()
        header = self._header(len(body), schema=table.schema, table=table.name, event_type=event_type)
        header.props.add(key="rowsCount", value=str(len(images)))
        return entry_pb.Entry(header=header, entryType=EntryType.ROWDATA, storeValue=body)

    def ddl(self, schema: str, table: str, event_type: entry_pb.EventType, sql: str) -> entry_pb.Entry:
        """A DDL statement: a ROWDATA entry with ``isDdl`` and the SQL, outside any transaction."""
        change = entry_pb.RowChange(eventType=event_type, isDdl=True, sql=sql, ddlSchemaName=schema)
        body = change.SerializeToString()
        header = self._header(len(body), schema=schema, table=table, event_type=event_type)
        return entry_pb.Entry(header=header, entryType=EntryType.ROWDATA, storeValue=body)


Rendered = list[tuple[str, int, bool]]  # (text, sqlType, isNull) per column


def _render(table: TableDef, row: Row | None) -> Rendered | None:
    if row is None:
        return None
    rendered = []
    for column in table.columns:
        value = render(column.mysql_type, row[column.name])
        rendered.append((value.text, value.sql_type, value.is_null))
    return rendered


def _updated_flags(after: Rendered, before: Rendered | None) -> list[bool]:
    """Canal's ``updated``: INSERT (no before image) marks every column; UPDATE compares text."""
    if before is None:
        return [True] * len(after)
    return [
        not ((old_null and new_null) or (not old_null and not new_null and old_text == new_text))
        for (new_text, _, new_null), (old_text, _, old_null) in zip(after, before)
    ]


def _fill(target: object, table: TableDef, values: Rendered, updated: list[bool]) -> None:
    for index, (column, (text, sql_type, is_null)) in enumerate(zip(table.columns, values)):
        column_pb = target.add()  # type: ignore[attr-defined]
        column_pb.index = index
        column_pb.sqlType = sql_type
        column_pb.name = column.name
        column_pb.isKey = column.is_key
        column_pb.updated = updated[index]
        column_pb.isNull = is_null
        column_pb.mysqlType = column.mysql_type.declared
        if not is_null:
            column_pb.value = text


def row_run(entries: Sequence[entry_pb.Entry]) -> RowRun:
    """Row-change entries of one table as the run a channel stages (the first entry's header names the table)."""
    first = entries[0].header
    run = RowRun(TableId(first.schemaName, first.tableName), keeps_positions=True)
    for entry in entries:
        run.add(EntryPosition.of(entry), entry.storeValue, rows_count(entry.header))
    return run
