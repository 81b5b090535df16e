"""Key ranges as SQL: row-value comparisons written out column by column, values as literals without quotes."""

from __future__ import annotations

import datetime
import decimal

import pytest

from canalbridge.source_db.chunks import KeyColumn, KeyRange, after, chunk_predicate, literal, quote, through

ID = KeyColumn("id", "bigint")
A, B, C = KeyColumn("a", "int"), KeyColumn("b", "varchar", "utf8mb4", "utf8mb4_bin"), KeyColumn("c", "int")
X = "_utf8mb4 X'78' COLLATE utf8mb4_bin"  # 'x' in column b


def test_a_single_column_key_compares_directly():
    assert after([ID], (7,)) == "(`id` > 7)"
    assert through([ID], (9,)) == "(`id` <= 9)"


def test_a_composite_key_compares_as_a_row_value_column_by_column():
    assert after([A, B, C], (1, "x", 3)) == (
        f"(`a` > 1) OR (`a` = 1 AND `b` > {X}) OR (`a` = 1 AND `b` = {X} AND `c` > 3)")
    assert through([A, B], (1, "x")) == f"(`a` < 1) OR (`a` = 1 AND `b` <= {X})"


def test_a_chunk_is_after_one_key_and_through_another_and_unbounded_sides_are_left_out():
    assert chunk_predicate([ID], KeyRange((10,), (20,))) == "((`id` > 10)) AND ((`id` <= 20))"
    assert chunk_predicate([ID], KeyRange(None, (20,))) == "((`id` <= 20))"
    assert chunk_predicate([ID], KeyRange(None, None)) == "1 = 1"


def test_strings_are_hex_in_the_columns_character_set_and_collation_so_no_quote_can_end_them():
    latin = KeyColumn("k", "varchar", "latin1", "latin1_swedish_ci")
    assert literal("it's \\ 100%", B) == "_utf8mb4 X'69742773205c2031303025' COLLATE utf8mb4_bin"
    assert literal("é", latin) == "CONVERT(_utf8mb4 X'c3a9' USING latin1) COLLATE latin1_swedish_ci"
    assert literal(b"\x00\xff", KeyColumn("k", "varbinary")) == "X'00ff'"
    assert quote("we`ird") == "`we``ird`"
    with pytest.raises(ValueError, match="not a character set or collation name"):
        KeyColumn("k", "varchar", "utf8mb4", "x'; DROP TABLE t; --")


@pytest.mark.parametrize(("value", "sql"), [
    (decimal.Decimal("1.50"), "1.50"),
    (decimal.Decimal("1E+3"), "1000"),
    (datetime.datetime(2024, 1, 2, 3, 4, 5, 6), "'2024-01-02 03:04:05.000006'"),
    (datetime.date(2024, 1, 2), "'2024-01-02'"),
    (datetime.timedelta(hours=-838, minutes=-59, seconds=-59), "'-838:59:59.000000'"),
    (-3, "-3"),
])
def test_key_values_of_other_types_keep_their_value_as_literals(value, sql):
    assert literal(value, KeyColumn("k", "any")) == sql


@pytest.mark.parametrize("value", [None, True, 0.5])
def test_a_value_no_key_holds_is_refused(value):
    with pytest.raises(ValueError, match="key column k"):
        literal(value, KeyColumn("k", "any"))


def test_a_key_given_the_wrong_number_of_values_is_refused():
    with pytest.raises(ValueError, match="2 columns given 1"):
        after([A, B], (1,))
