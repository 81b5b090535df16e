"""An error told in one line: a failed read or commit names its Java cause, not Py4J's call."""

from __future__ import annotations

from canalbridge.sync.errors import BRIEF_CHARS, first_line


class Py4JLike(Exception):
    pass


def test_a_failed_read_is_named_by_the_java_exception_under_py4js_line():
    failure = Py4JLike("An error occurred while calling o123.localCheckpoint.\n"
                       ": java.sql.SQLSyntaxErrorException: (conn=12) SELECT command denied to user 'u'@'localhost'\n"
                       "\tat org.mariadb.jdbc.export.ExceptionFactory.createException(ExceptionFactory.java:289)")
    assert first_line(failure) == ("java.sql.SQLSyntaxErrorException: (conn=12) SELECT command denied to user "
                                    "'u'@'localhost'")
    assert first_line(ValueError("plain\nsecond")) == "plain"
    assert first_line(ValueError()) == "ValueError"


def test_a_line_is_bounded():
    assert first_line(RuntimeError("x" * 10_000)) == "x" * BRIEF_CHARS
