"""One connection to the source database, and the server's errors turned into typed ones."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

import pymysql

from canalbridge.source_db.chunks import SESSION_SETUP
from canalbridge.source_db.errors import (
    SourceDbAccessError,
    SourceDbAuthError,
    SourceDbConnectionError,
    SourceDbError,
    SourceDbTlsError,
)
from canalbridge.source_db.tls import NO_TLS, SourceTls

# MySQL's error codes (shared by MariaDB) that name what the user must fix.
_AUTH = {1045, 1129, 1130, 1698, 1820, 1862}  # refused: password, blocked or unknown host, plugin, expired
_ACCESS = {1044, 1142, 1143, 1146, 1227}  # a database, command or column denied; no such table; a privilege
_NO_SUCH_TABLE = 1146
_GONE = {1927, 2002, 2003, 2006, 2013, 2014, 2055, 4031}  # cannot connect, gone, killed, lost
# PyMySQL's, for a server that offers no TLS to a client that requires it; the server's, for a client without TLS
# where it requires TLS of everyone (require_secure_transport).
_NO_TLS = {2026, 3159}
# What a lost server looks like mid-handshake (a restart): not a TLS setting to fix.
_TLS_CUT = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


class SourceDb:
    """A connection to the source, opened on first use and reopened after it was lost; not thread-safe.

    Values come back as PyMySQL gives them (int, str, bytes, Decimal,
    datetime...), in the connection's utf8mb4 character set.
    """

    def __init__(self, host: str, port: int, user: str, password: str, *, tls: SourceTls = NO_TLS,
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 600.0) -> None:
        self.address = f"{host}:{port}"
        self.user = user
        self._arguments: dict[str, Any] = {
            "host": host, "port": port, "user": user, "password": password, "charset": "utf8mb4",
            "autocommit": True, "connect_timeout": connect_timeout_s, "read_timeout": read_timeout_s,
            "write_timeout": read_timeout_s, "init_command": SESSION_SETUP,
        }
        if not tls.enabled:
            # None at all: PyMySQL would otherwise take TLS when offered, unchecked, as no JDBC read does.
            self._arguments["ssl_disabled"] = True
        self.tls = tls
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
            if self.tls.enabled and "ssl" not in self._arguments:
                self._arguments["ssl"] = self._tls_context()
            self._connection = pymysql.connect(**self._arguments)
        return self._connection

    def _tls_context(self) -> ssl.SSLContext | None:
        try:
            return self.tls.context()
        except (OSError, ssl.SSLError) as exc:  # (a CA file gone or not PEM since the settings were checked)
            raise SourceDbTlsError(f"cannot load tls_ca {self.tls.ca}: {exc}", address=self.address) from exc

    def _error(self, exc: pymysql.MySQLError, table: str | None) -> SourceDbError:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        said = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code in _AUTH:
            return SourceDbAuthError(f"user {self.user!r} was refused ({said}); check the snapshot source's user "
                                     "and password, and `tls` if the user must connect over TLS",
                                     address=self.address, table=table)
        cause = getattr(exc, "original_exception", None)  # (PyMySQL's: what failed to connect)
        if code in _NO_TLS or (isinstance(cause, ssl.SSLError) and not isinstance(cause, _TLS_CUT)):
            return SourceDbTlsError(f"TLS ({self.tls.mode}) failed: {said}; check the snapshot source's `tls` and "
                                    "`tls_ca`", address=self.address, table=table)
        if code in _ACCESS:
            return SourceDbAccessError(f"{said} (error {code}); a snapshot's user needs SELECT on the tables it "
                                       "reads, and SELECT, INSERT and DELETE on the signal table", address=self.address,
                                       table=table, missing=code == _NO_SUCH_TABLE)
        # InterfaceError: PyMySQL's own, on a connection it closed (an interrupted read): reconnect on next use.
        if code in _GONE or isinstance(exc, pymysql.err.InterfaceError) or (
                isinstance(exc, pymysql.err.OperationalError) and code is None):
            return SourceDbConnectionError(f"connection failed or lost: {said}", address=self.address, table=table)
        return SourceDbError(f"{said} (error {code})", address=self.address, table=table)
