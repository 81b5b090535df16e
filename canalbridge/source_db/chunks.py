"""Key ranges as SQL: what one chunk of a snapshot reads, and where the next one ends.

A chunk is the rows whose key lies after one key and up to another, in the
key's order (keyset pagination: no OFFSET over the table, no row read
twice). A composite key compares as a row value, written out column by
column, ``a > x OR (a = x AND b > y)``, which MySQL and MariaDB read as
index ranges (a row constructor ``(a, b) > (x, y)`` is not always).

Values are written as literals, since Spark's JDBC reads take each chunk's
predicate as SQL text; literals that hold no quote at all, so that neither
the session's SQL mode nor its character set changes what they say. A
string is its UTF-8 bytes in hex, converted to the column's character set
and compared in the column's collation, the order ``ORDER BY`` uses.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Sequence
from dataclasses import dataclass

KeyValues = tuple[object, ...]  # a key's values as the source database returns them, in the key's column order

#: Run first in each session of a snapshot (its own, and each JDBC read's): a TIMESTAMP key's text is then one
#: instant; no ``sql_select_limit`` the server sets for every session cuts a read short without a word (a chunk
#: missing rows, and a re-sync's delete of its key range removing them from the target); and no ``sql_mode`` of the
#: server's changes what a read returns (PAD_CHAR_TO_FULL_LENGTH pads CHAR keys) or how a filter parses (ANSI_QUOTES).
SESSION_SETUP = ("SET SESSION time_zone = '+00:00', SESSION sql_select_limit = 18446744073709551615, "
                 "SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class KeyColumn:
    """A key column: its name, its ``DATA_TYPE``, and a string column's character set and collation."""

    name: str
    data_type: str
    charset: str | None = None
    collation: str | None = None

    def __post_init__(self) -> None:
        for part in (self.charset, self.collation):
            if part is not None and not _NAME.match(part):
                raise ValueError(f"not a character set or collation name: {part!r}")


def quote(name: str) -> str:
    """An identifier in backticks (a backtick in it doubled)."""
    return "`" + name.replace("`", "``") + "`"


def literal(value: object, column: KeyColumn) -> str:
    """``value`` of ``column`` as a SQL literal without quotes that can be broken out of."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"key column {column.name}: no key value {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex()}'"
    if isinstance(value, str):
        text = f"_utf8mb4 X'{value.encode('utf-8').hex()}'"
        if column.charset and column.charset != "utf8mb4":
            text = f"CONVERT({text} USING {column.charset})"
        return f"{text} COLLATE {column.collation}" if column.collation else text
    if isinstance(value, datetime.datetime | datetime.date | datetime.timedelta):
        # Digits, dashes, colons, a dot and a sign: nothing to escape.
        return f"'{_temporal(value)}'"
    raise ValueError(f"key column {column.name}: no literal for a {type(value).__name__} ({value!r})")


def _temporal(value: datetime.datetime | datetime.date | datetime.timedelta) -> str:
    if isinstance(value, datetime.timedelta):
        sign = "-" if value < datetime.timedelta(0) else ""
        seconds, micros = divmod(abs(value) // datetime.timedelta(microseconds=1), 1_000_000)
        hours, rest = divmod(seconds, 3600)
        return f"{sign}{hours}:{rest // 60:02d}:{rest % 60:02d}.{micros:06d}"
    return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else value.isoformat()


@dataclass(frozen=True)
class KeyRange:
    """The keys of one chunk: after ``after`` (None: from the first key) through ``through`` (None: no bound)."""

    after: KeyValues | None
    through: KeyValues | None


def _compare(columns: Sequence[KeyColumn], values: KeyValues, strict: str, last: str) -> str:
    """``columns`` against ``values`` as a row value: ``strict`` ('>' or '<') on some column, equal before it,
    and ``last`` on the last column (strict or not)."""
    if len(columns) != len(values):
        raise ValueError(f"a key of {len(columns)} columns given {len(values)} values")
    sql = [(quote(column.name), literal(value, column)) for column, value in zip(columns, values)]
    terms = []
    for index, (name, value) in enumerate(sql):
        equal = [f"{n} = {v}" for n, v in sql[:index]]
        operator = last if index == len(sql) - 1 else strict
        terms.append(" AND ".join([*equal, f"{name} {operator} {value}"]))
    return " OR ".join(f"({term})" for term in terms)


def after(columns: Sequence[KeyColumn], key: KeyValues) -> str:
    """Rows whose key lies after ``key``."""
    return _compare(columns, key, ">", ">")


def through(columns: Sequence[KeyColumn], key: KeyValues) -> str:
    """Rows whose key lies at or before ``key``."""
    return _compare(columns, key, "<", "<=")


def chunk_predicate(columns: Sequence[KeyColumn], keys: KeyRange) -> str:
    """The WHERE condition of the rows of ``keys`` (``1 = 1`` for every row)."""
    parts = []
    if keys.after is not None:
        parts.append(f"({after(columns, keys.after)})")
    if keys.through is not None:
        parts.append(f"({through(columns, keys.through)})")
    return " AND ".join(parts) or "1 = 1"
