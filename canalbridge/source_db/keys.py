"""The key a snapshot cuts a table by: its primary key, or the key its channel names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from canalbridge.source_db.chunks import quote
from canalbridge.source_db.connection import SourceDb
from canalbridge.source_db.errors import SourceDbAccessError, TableKeyError


@dataclass(frozen=True)
class TableKey:
    """A source table and the columns of its key, in the key's order."""

    schema: str
    table: str
    columns: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def sql_table(self) -> str:
        return f"{quote(self.schema)}.{quote(self.table)}"


def table_key(db: SourceDb, schema: str, table: str, configured: Sequence[str] | None = None) -> TableKey:
    """The key of ``schema.table``: ``configured`` (the channel's ``key``) if given, else the primary key.

    Raises :class:`TableKeyError` when there is neither, or a configured
    column is missing or may be NULL (keyset reads never see a row whose key
    is NULL), and :class:`SourceDbAccessError` when the table is not there
    (or the user may not see it).
    """
    name = f"{schema}.{table}"
    columns = db.query(
        "SELECT COLUMN_NAME, IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (schema, table), table=name)
    if not columns:
        raise SourceDbAccessError(f"no such table, or user {db.user!r} has no privilege on it", address=db.address,
                                  table=name)
    if configured:
        nullable = {str(column).lower(): flag == "YES" for column, flag in columns}
        missing = [c for c in configured if c.lower() not in nullable]
        if missing:
            raise TableKeyError(f"the channel's key names columns the table does not have: {missing}",
                                address=db.address, table=name)
        null = [c for c in configured if nullable[c.lower()]]
        if null:
            raise TableKeyError(f"the channel's key columns {null} may be NULL, and a snapshot reads by key ranges "
                                "that never hold a NULL key; make them NOT NULL or key the channel by others",
                                address=db.address, table=name)
        return TableKey(schema, table, tuple(configured))
    primary = db.query(
        "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", (schema, table), table=name)
    if not primary:
        raise TableKeyError("the table has no primary key, so a snapshot cannot cut it into key ranges; set the "
                            "channel's `key` to columns that identify a row", address=db.address, table=name)
    return TableKey(schema, table, tuple(str(row[0]) for row in primary))
