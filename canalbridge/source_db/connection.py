"""One connection to the source database, and the server's errors turned into typed ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pymysql

from canalbridge.source_db.chunks import SESSION_SETUP
from canalbridge.source_db.errors import (
    SourceDbAccessError,
    SourceDbAuthError,
    SourceDbConnectionError,
    SourceDbError,
)

# MySQL's error codes (shared by MariaDB) that name what the user must fix.
_AUTH = {1045, 1129, 1130, 1698, 1820, 1862}  # refused: password, blocked or unknown host, plugin, expired
_ACCESS = {1044, 1142, 1143, 1146, 1227}  # a database, command or column denied; no such table; a privilege
_GONE = {1927, 2002, 2003, 2006, 2013, 2014, 2026, 2055, 4031}  # cannot connect, gone, killed, lost, TLS failed


class SourceDb:
    """A connection to the source, opened on first use and reopened after it was lost; not thread-safe.

    Values come back as PyMySQL gives them (int, str, bytes, Decimal,
    datetime...), in the connection's utf8mb4 character set.
    """

    def __init__(self, host: str, port: int, user: str, password: str, *, ssl: Mapping[str, Any] | None = None,
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 600.0) -> None:
        self.address = f"{host}:{port}"
        self.user = user
        self._arguments: dict[str, Any] = {
            "host": host, "port": port, "user": user, "password": password, "charset": "utf8mb4",
            "autocommit": True, "connect_timeout": connect_timeout_s, "read_timeout": read_timeout_s,
            "write_timeout": read_timeout_s, "init_command": SESSION_SETUP,
        }
        if ssl:
            self._arguments["ssl"] = dict(ssl)
        self._connection: pymysql.connections.Connection | None = None

    def __repr__(self) -> str:  # never shows the password
        return f"SourceDb({self.user}@{self.address})"

    def query(self, sql: str, params: Sequence[object] = (), *, table: str | None = None) -> list[tuple[Any, ...]]:
        """The rows of one statement; a failure is raised as a :class:`SourceDbError` naming ``table``."""
        try:
            connection = self._connect()
            with connection.cursor() as cursor:
                cursor.execute(sql, tuple(params) if params else None)  # (None: a '%' in the SQL is itself)
                return list(cursor.fetchall())
        except pymysql.MySQLError as exc:
            error = self._error(exc, table)
            if isinstance(error, SourceDbConnectionError):
                self.close()
            raise error from exc
        except RuntimeError as exc:  # PyMySQL's, e.g. a password exchange it cannot do
            self.close()
            raise SourceDbAuthError(f"cannot log in as {self.user!r}: {exc}", address=self.address,
                                    table=table) from exc

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except pymysql.MySQLError:
                pass  # (already gone)

    def __enter__(self) -> SourceDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> pymysql.connections.Connection:
        if self._connection is not None and not self._connection.open:
            self._connection = None  # (closed under us: an interrupted read)
        if self._connection is None:
            self._connection = pymysql.connect(**self._arguments)
        return self._connection

    def _error(self, exc: pymysql.MySQLError, table: str | None) -> SourceDbError:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        said = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code in _AUTH:
            return SourceDbAuthError(f"user {self.user!r} was refused ({said}); check the snapshot source's user "
                                     "and password", address=self.address, table=table)
        if code in _ACCESS:
            return SourceDbAccessError(f"{said} (error {code}); a snapshot's user needs SELECT on the tables it "
                                       "reads, and SELECT, INSERT and DELETE on the signal table", address=self.address,
                                       table=table)
        # InterfaceError: PyMySQL's own, on a connection it closed (an interrupted read): reconnect on next use.
        if code in _GONE or isinstance(exc, pymysql.err.InterfaceError) or (
                isinstance(exc, pymysql.err.OperationalError) and code is None):
            return SourceDbConnectionError(f"connection failed or lost: {said}", address=self.address, table=table)
        return SourceDbError(f"{said} (error {code})", address=self.address, table=table)
