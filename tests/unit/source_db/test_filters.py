"""A back-fill's filter is one SQL condition: what could end the query or hide the key range after it is
refused, whatever sits inside a quoted string is not."""

from __future__ import annotations

import pytest

from canalbridge.source_db import FilterError, checked_filter


@pytest.mark.parametrize("condition", [
    "id <= 10",
    "  created_at >= '2024-01-01' AND (status = 'open' OR status = 'held')  ",
    "name = 'it''s; -- not a comment (nor a paren'",
    '`select` = "x)(y"',
    "`odd``name` IN (1, 2)",
])
def test_one_condition_passes_stripped(condition):
    assert checked_filter(condition) == condition.strip()


@pytest.mark.parametrize("condition, says", [
    ("", "empty"),
    ("   ", "empty"),
    ("1 = 1) OR (1 = 1", "a ')' closes more than was opened"),
    ("(id < 5", "a '(' is not closed"),
    ("id < 5; DROP TABLE t", "one condition, not statements"),
    ("id < 5 -- and the range", "no comments"),
    ("id < 5 # and the range", "no comments"),
    ("id < 5 /* and the range */", "no comments"),
    ("name = 'open", "a ' quote is not closed"),
    (r"status = 'x\' ) OR 1=1 #'", "no backslash"),  # with NO_BACKSLASH_ESCAPES the string would end at \'
])
def test_what_is_not_one_condition_is_refused_saying_why(condition, says):
    with pytest.raises(FilterError, match=says.replace("(", r"\(").replace(")", r"\)")):
        checked_filter(condition)
