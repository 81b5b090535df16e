"""A reference consumer: apply Canal entries to in-memory tables of Canal text.

It is the simplest correct reading of a Canal stream (INSERT puts the after
image, DELETE removes the before image's key, UPDATE removes the before key
and puts the after image), used to check that a workload's entries and its
expected tables agree, and by the demo.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

EventType = entry_pb.EventType
TextRow = dict[str, str | None]
TextTables = dict[str, dict[tuple[str | None, ...], TextRow]]


def _row(columns: Iterable[entry_pb.Column]) -> tuple[tuple[str | None, ...], TextRow]:
    row: TextRow = {}
    key: list[str | None] = []
    for column in columns:
        value = None if column.isNull else column.value
        row[column.name] = value
        if column.isKey:
            key.append(value)
    return tuple(key), row


def row_changes(entries: Iterable[entry_pb.Entry]) -> Iterator[tuple[str, int, entry_pb.RowData]]:
    """Every DML row of ``entries`` as (``schema.table``, event type, RowData), in order."""
    for entry in entries:
        if entry.entryType != entry_pb.EntryType.ROWDATA:
            continue
        change = entry_pb.RowChange.FromString(entry.storeValue)
        if change.isDdl:
            continue
        table = f"{entry.header.schemaName}.{entry.header.tableName}"
        for row_data in change.rowDatas:
            yield table, change.eventType, row_data


def apply_entries(tables: TextTables, entries: Iterable[entry_pb.Entry]) -> int:
    """Apply every DML row of ``entries`` to ``tables``; return the number of rows applied."""
    applied = 0
    for name, event_type, row_data in row_changes(entries):
        table = tables.setdefault(name, {})
        if event_type in (EventType.UPDATE, EventType.DELETE):
            old_key, _ = _row(row_data.beforeColumns)
            table.pop(old_key, None)
        if event_type in (EventType.INSERT, EventType.UPDATE):
            new_key, row = _row(row_data.afterColumns)
            table[new_key] = row
        applied += 1
    return applied
