"""Key ranges as SQL: what one chunk of a snapshot reads, and where the next one ends.

A chunk is the rows whose key lies after one key and up to another, in the
key's order (keyset pagination: no OFFSET over the table, no row read
twice). A composite key compares as a row value, written out column by
column, ``a > x OR (a = x AND b > y)``, which MySQL and MariaDB read as
index ranges (a row constructor ``(a, b) > (x, y)`` is not always).

Values are written as literals, since Spark's JDBC reads take each chunk's
predicate as SQL text. Strings are escaped with backslashes, so every
session that runs these must not be in ``NO_BACKSLASH_ESCAPES`` mode
(:data:`SESSION_SQL_MODE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pymysql.converters import escape_item

Key = tuple[object, ...]  # a key's values, in the key's column order

#: Run first in each session that reads with these predicates: backslashes in literals are escapes.
SESSION_SQL_MODE = "SET SESSION sql_mode = REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')"


def quote(name: str) -> str:
    """An identifier in backticks (a backtick in it doubled)."""
    return "`" + name.replace("`", "``") + "`"


def literal(value: object) -> str:
    """A value as a SQL literal (strings with backslash escapes: see :data:`SESSION_SQL_MODE`)."""
    if isinstance(value, float):
        return repr(value)
    return str(escape_item(value, "utf8mb4"))


@dataclass(frozen=True)
class KeyRange:
    """The keys of one chunk: after ``after`` (None: from the first key) through ``through`` (None: no bound)."""

    after: Key | None
    through: Key | None


def _compare(columns: Sequence[str], values: Key, strict: str, last: str) -> str:
    """``columns`` against ``values`` as a row value: ``strict`` ('>' or '<') on some column, equal before it,
    and ``last`` on the last column (strict or not)."""
    if len(columns) != len(values):
        raise ValueError(f"a key of {len(columns)} columns given {len(values)} values")
    terms = []
    for index, column in enumerate(columns):
        equal = [f"{quote(c)} = {literal(v)}" for c, v in zip(columns[:index], values[:index])]
        operator = last if index == len(columns) - 1 else strict
        terms.append(" AND ".join([*equal, f"{quote(column)} {operator} {literal(values[index])}"]))
    return " OR ".join(f"({term})" for term in terms)


def after(columns: Sequence[str], key: Key) -> str:
    """Rows whose key lies after ``key``."""
    return _compare(columns, key, ">", ">")


def through(columns: Sequence[str], key: Key) -> str:
    """Rows whose key lies at or before ``key``."""
    return _compare(columns, key, "<", "<=")


def chunk_predicate(columns: Sequence[str], keys: KeyRange) -> str:
    """The WHERE condition of the rows of ``keys`` (``1 = 1`` for every row)."""
    parts = []
    if keys.after is not None:
        parts.append(f"({after(columns, keys.after)})")
    if keys.through is not None:
        parts.append(f"({through(columns, keys.through)})")
    return " AND ".join(parts) or "1 = 1"
