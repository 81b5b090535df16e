"""What an Iceberg writer's apply raises when retrying the same rows cannot help."""

from __future__ import annotations

import re

from canalbridge.sync.errors import SyncError

# Spark error classes that retrying the same rows cannot fix.
_DATA_ERRORS = ("CAST_INVALID_INPUT", "NUMERIC_VALUE_OUT_OF_RANGE", "CAST_OVERFLOW", "DATETIME_OVERFLOW")


class ValueConversionError(SyncError):
    """A value that is not a value of its column's type (e.g. "abc" for an int)."""

    transient = False

    def __init__(self, table: str, message: str) -> None:
        self.table = table
        super().__init__(f"table {table}: a value does not convert to its column type: {message}")


_DATA_ERROR_RE = re.compile(r"\[(?:" + "|".join(_DATA_ERRORS) + r")\][^\n]*?\.(?=\s|$)")


def data_error(exc: BaseException) -> str | None:
    """Spark's sentence about a value that cannot convert (it names the value), if that is the error."""
    match = _DATA_ERROR_RE.search(str(exc))
    return match.group(0) if match else None
