"""A user's row filter (``canalbridge snapshot --where``): one SQL condition, put in parentheses after the
snapshot's own conditions in every query of a table's chunks.

Only its shape is checked here; the server says whether it is valid SQL
for the table (:func:`check_filter` runs it once). The shape check keeps the
filter one condition: its parentheses balance, and no statement separator or
comment outside a quoted string could end the query or hide the key range
that follows it. A backslash is refused anywhere: whether it escapes a
quote depends on the server's ``sql_mode`` (``NO_BACKSLASH_ESCAPES``), so
a string could end where this check does not see it end.
"""

from __future__ import annotations

from canalbridge.source_db.chunks import quote
from canalbridge.source_db.connection import SourceDb

_QUOTES = "'\"`"


class FilterError(ValueError):
    """A filter that is not one SQL condition; the message says why."""


def checked_filter(text: str) -> str:
    """``text`` stripped, if it is one condition as far as its shape shows; else :class:`FilterError`."""
    condition = text.strip()
    if not condition:
        raise FilterError("the filter is empty")
    if "\\" in condition:
        raise FilterError(f"{condition!r}: no backslash (whether it escapes a quote depends on the server's "
                          f"sql_mode); write a quote inside a string twice")
    depth, quote_char, index = 0, "", 0
    while index < len(condition):
        char = condition[index]
        if quote_char:
            if char == quote_char:
                if condition[index + 1:index + 2] == quote_char:
                    index += 1  # (a doubled quote stands for itself)
                else:
                    quote_char = ""
        elif char in _QUOTES:
            quote_char = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise FilterError(f"{condition!r}: a ')' closes more than was opened")
        elif char == ";":
            raise FilterError(f"{condition!r}: one condition, not statements (';')")
        elif char == "#" or condition.startswith(("--", "/*"), index):
            raise FilterError(f"{condition!r}: no comments")
        index += 1
    if quote_char:
        raise FilterError(f"{condition!r}: a {quote_char} quote is not closed")
    if depth:
        raise FilterError(f"{condition!r}: a '(' is not closed")
    return condition


def check_filter(db: SourceDb, schema: str, table: str, condition: str) -> None:
    """Have the server compile ``condition`` against the table (reading no row): a filter that is not valid SQL
    for it raises :class:`~canalbridge.source_db.errors.SourceDbError` with the server's words."""
    db.query(f"SELECT 1 FROM {quote(schema)}.{quote(table)} WHERE ({condition}) LIMIT 0", table=f"{schema}.{table}")
