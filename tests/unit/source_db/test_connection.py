"""The source's errors, typed by what the user must fix, naming the server and the table, never the password."""

from __future__ import annotations

import pymysql
import pytest

from canalbridge.source_db import (
    SourceDb,
    SourceDbAccessError,
    SourceDbAuthError,
    SourceDbConnectionError,
    SourceDbError,
)

PASSWORD = "never-shown-secret"


@pytest.mark.parametrize(("error", "kind", "says"), [
    (pymysql.err.OperationalError(1045, "Access denied for user 'u'@'h'"), SourceDbAuthError, "'u' was refused"),
    (pymysql.err.OperationalError(1142, "SELECT command denied"), SourceDbAccessError,
     "SELECT on the tables it reads, and SELECT, INSERT and DELETE on the signal table"),
    (pymysql.err.OperationalError(2003, "Can't connect"), SourceDbConnectionError, "connection failed or lost"),
    (pymysql.err.InterfaceError(0, ""), SourceDbConnectionError, "connection failed or lost"),
    (pymysql.err.ProgrammingError(1064, "syntax"), SourceDbError, "syntax (error 1064)"),
])
def test_a_server_error_is_typed_by_what_to_fix_and_names_server_and_table(error, kind, says):
    db = SourceDb("127.0.0.1", 3306, "u", PASSWORD)
    typed = db._error(error, "db.t")
    assert type(typed) is kind
    assert says in str(typed)
    assert str(typed).startswith("source database 127.0.0.1:3306 table db.t: ")
    assert PASSWORD not in str(typed) and PASSWORD not in repr(db)
