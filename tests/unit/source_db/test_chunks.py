"""Key ranges as SQL: row-value comparisons written out column by column, values as safe literals."""

from __future__ import annotations

import datetime
import decimal

import pytest

from canalbridge.source_db.chunks import KeyRange, after, chunk_predicate, literal, quote, through


def test_a_single_column_key_compares_directly():
    assert after(["id"], (7,)) == "(`id` > 7)"
    assert through(["id"], (9,)) == "(`id` <= 9)"


def test_a_composite_key_compares_as_a_row_value_column_by_column():
    assert after(["a", "b", "c"], (1, "x", 3)) == (
        "(`a` > 1) OR (`a` = 1 AND `b` > 'x') OR (`a` = 1 AND `b` = 'x' AND `c` > 3)")
    assert through(["a", "b"], (1, "x")) == "(`a` < 1) OR (`a` = 1 AND `b` <= 'x')"


def test_a_chunk_is_after_one_key_and_through_another_and_unbounded_sides_are_left_out():
    assert chunk_predicate(["id"], KeyRange((10,), (20,))) == "((`id` > 10)) AND ((`id` <= 20))"
    assert chunk_predicate(["id"], KeyRange(None, (20,))) == "((`id` <= 20))"
    assert chunk_predicate(["id"], KeyRange(None, None)) == "1 = 1"


def test_identifiers_and_values_cannot_break_out_of_their_quotes():
    assert quote("we`ird") == "`we``ird`"
    assert literal("it's \\ 100%") == "'it\\'s \\\\ 100%'"
    assert literal(b"\x00\xff") == "_binary X'00ff'"


@pytest.mark.parametrize(("value", "sql"), [
    (decimal.Decimal("1.50"), "1.50"),
    (datetime.datetime(2024, 1, 2, 3, 4, 5, 6), "'2024-01-02 03:04:05.000006'"),
    (datetime.date(2024, 1, 2), "'2024-01-02'"),
    (-3, "-3"),
    (0.1, "0.1"),
])
def test_key_values_of_other_types_keep_their_value_as_literals(value, sql):
    assert literal(value) == sql


def test_a_key_given_the_wrong_number_of_values_is_refused():
    with pytest.raises(ValueError, match="2 columns given 1"):
        after(["a", "b"], (1,))
