"""Typed errors of the source database. Each names the server, and the table when there is one.

No error carries a password: messages are built from the address, the
user, the table and what the server said, which never holds the password.
"""

from __future__ import annotations


class SourceDbError(Exception):
    """Base class: something went wrong reading the source database."""

    def __init__(self, message: str, *, address: str, table: str | None = None) -> None:
        self.address = address
        self.table = table
        self.reason = message  # without the address and table
        where = f"source database {address}" + (f" table {table}" if table else "")
        super().__init__(f"{where}: {message}")


class SourceDbConnectionError(SourceDbError):
    """The server could not be reached, or the connection was lost mid-query."""


class SourceDbAuthError(SourceDbError):
    """The server refused the user or its password."""


class SourceDbTlsError(SourceDbError):
    """TLS with the server failed: it offers none, its certificate is not the one expected, or no common protocol."""


class SourceDbAccessError(SourceDbError):
    """The user lacks a privilege a snapshot needs, or the table does not exist (``missing``: the table is not
    there for this user, which cannot tell a dropped table from one it may not see)."""

    def __init__(self, message: str, *, address: str, table: str | None = None, missing: bool = False) -> None:
        super().__init__(message, address=address, table=table)
        self.missing = missing


class TableKeyError(SourceDbError):
    """A table a snapshot cannot cut into key ranges: no primary key and no key configured, or a bad key."""


class SignalTableError(SourceDbError):
    """The signal table is missing or is not the table a snapshot writes its watermarks into."""
