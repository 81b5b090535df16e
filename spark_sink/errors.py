"""Typed errors of the Spark sink: what an apply raises when retrying the same rows cannot help, a setup or target
that cannot work, a change a target cannot follow; and a Java error told in one line."""

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


class TargetReadError(SyncError):
    """A target whose state could not be read when its channel opened: the catalog or the store did not answer
    (or refused); the cause is Spark's, shortened to its exception and root cause."""

    def __init__(self, target: str, cause: BaseException) -> None:
        self.target = target
        self.cause = cause
        super().__init__(f"target {target}: cannot read its state: {java_error(cause)}")


_JAVA_NAME = re.compile(r"^(?:[a-z_$][\w$]*\.)+(?=[A-Z])")  # a class name's package


def java_error(exc: BaseException) -> str:
    """What a Spark or py4j error says, in a line: the Java exception and, when there is one, its root cause,
    without packages and stack frames (``RESTException: ... (caused by HttpHostConnectException: ... refused)``).
    Anything else is as ``str`` gives it."""
    lines = [line.strip() for line in str(exc).splitlines()]
    thrown = next((line[2:] for line in lines if line.startswith(": ")), None)  # py4j: ": java.lang.Foo: why"
    if thrown is None:
        return str(exc)
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    summary = _JAVA_NAME.sub("", thrown)
    return summary + (f" (caused by {_JAVA_NAME.sub('', causes[-1])})" if causes else "")


class EvolutionRefused(ValueError):
    """A change the target cannot follow; the message names the column."""


class SparkSetupError(SyncError):
    """Spark cannot start here (no Java, a jar the config needs is missing)."""

    transient = False  # a person installs what is missing


class TargetTableError(SyncError):
    """The target table cannot take this channel's rows; names table and column."""

    transient = False  # a person fixes the target or the config


class UnsupportedTypeError(ValueError):
    """A MySQL column type with no mapping."""
