"""The key a snapshot cuts a table by (its primary key, or the key its channel names), and the table's columns.

Keyset reads need a key whose text in SQL is the value it orders by, and
that identifies one row: so the key's columns may not be NULL, a
configured key must be what a unique index holds, and FLOAT, DOUBLE, ENUM
and SET columns are refused (a float's text is not the value stored; an
enum orders by its index but compares as text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from canalbridge.source_db.chunks import KeyColumn, quote
from canalbridge.source_db.connection import SourceDb
from canalbridge.source_db.errors import SourceDbAccessError, TableKeyError

_UNORDERED = {"float", "double", "real", "enum", "set"}


@dataclass(frozen=True)
class TableKey:
    """A source table and the columns of its key, in the key's order."""

    schema: str
    table: str
    columns: tuple[KeyColumn, ...]

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @property
    def sql_table(self) -> str:
        return f"{quote(self.schema)}.{quote(self.table)}"


def table_key(db: SourceDb, schema: str, table: str, configured: Sequence[str] | None = None) -> TableKey:
    """The key of ``schema.table``: ``configured`` (the channel's ``key``) if given, else the primary key.

    Raises :class:`TableKeyError` for a key a snapshot cannot read by (see
    the module), and :class:`SourceDbAccessError` when the table is not
    there (or the user may not see it).
    """
    name = f"{schema}.{table}"
    rows = db.query(
        "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, IS_NULLABLE, TABLE_SCHEMA, TABLE_NAME "
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (schema, table), table=name)
    if not rows:
        raise SourceDbAccessError(f"no such table, or user {db.user!r} has no privilege on it", address=db.address,
                                  table=name, missing=True)
    described = {str(row[0]).lower(): row for row in rows}
    indexes: dict[str, list[str]] = {}
    for index, column in db.query(
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX", (schema, table), table=name):
        indexes.setdefault(str(index), []).append(str(column))

    def refuse(message: str) -> TableKeyError:
        return TableKeyError(message, address=db.address, table=name)

    if configured:
        missing = [c for c in configured if c.lower() not in described]
        if missing:
            raise refuse(f"the channel's key names columns the table does not have: {missing}")
        if not any({c.lower() for c in index} == {c.lower() for c in configured} for index in indexes.values()):
            raise refuse(f"no unique index holds exactly the channel's key {list(configured)}: a snapshot reads by "
                         "key ranges of an index, each key one row; add one, or key the channel by one")
        names = [str(described[c.lower()][0]) for c in configured]
    elif "PRIMARY" in indexes:
        names = indexes["PRIMARY"]
    else:
        raise refuse("the table has no primary key, so a snapshot cannot cut it into key ranges; set the "
                     "channel's `key` to columns that identify a row")
    columns = []
    for column in names:
        _, data_type, charset, collation, nullable, _, _ = described[column.lower()]
        if nullable == "YES":
            raise refuse(f"the key column {column!r} may be NULL, and a snapshot reads by key ranges that never "
                         "hold a NULL key; make it NOT NULL or key the channel by others")
        if str(data_type).lower() in _UNORDERED:
            raise refuse(f"the key column {column!r} is a {data_type}, whose text in SQL is not the value it "
                         "orders by; key the channel by other columns")
        columns.append(KeyColumn(column, str(data_type).lower(), None if charset is None else str(charset),
                                 None if collation is None else str(collation)))
    # As the server spells the names (the binlog's spelling, whatever case the caller used).
    return TableKey(str(rows[0][5]), str(rows[0][6]), tuple(columns))


def table_rows_estimate(db: SourceDb, schema: str, table: str) -> int | None:
    """The server's estimate of the rows in ``schema.table`` (InnoDB's ``TABLE_ROWS``: from index statistics,
    often off by tens of percent, but free); None when the server keeps none."""
    rows = db.query("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (schema, table), table=f"{schema}.{table}")
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def table_columns(db: SourceDb, schema: str, table: str) -> tuple[tuple[str, str], ...]:
    """(name, type as declared: ``COLUMN_TYPE``, what Canal gives as ``mysqlType``) of each column of
    ``schema.table``, in the table's order; :class:`SourceDbAccessError` when the table is not there."""
    name = f"{schema}.{table}"
    rows = db.query("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (schema, table), table=name)
    if not rows:
        raise SourceDbAccessError(f"no such table, or user {db.user!r} has no privilege on it", address=db.address,
                                  table=name, missing=True)
    return tuple((str(column), str(declared)) for column, declared in rows)

