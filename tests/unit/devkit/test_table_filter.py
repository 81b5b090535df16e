"""Canal's subscription filter syntax (AviaterRegexFilter)."""

import pytest

from canalbridge.devkit.table_filter import TableFilter, split_filter


def test_empty_filter_lets_everything_through():
    assert TableFilter("").matches("any", "table")


def test_filter_matches_whole_name_only():
    only_orders = TableFilter(r"shop\.orders")
    assert only_orders.matches("shop", "orders")
    assert not only_orders.matches("shop", "orders_archive")
    assert not only_orders.matches("myshop", "orders")


def test_filter_ignores_case():
    assert TableFilter(r"Shop\.Orders").matches("SHOP", "orders")


def test_every_comma_separates_patterns_even_inside_a_quantifier_as_in_canal_1_1_7():
    assert split_filter(r"a\.b,c\.d{1,2},(x|y)\.z") == [r"a\.b", r"c\.d{1", r"2}", r"(x|y)\.z"]
    numbered = TableFilter(r"db\.t_\d{1,2}")
    assert not numbered.matches("db", "t_7") and not numbered.matches("db", "t_42")


@pytest.mark.parametrize(
    "filter_text, schema, table, expected",
    [
        (r".*\..*", "a", "b", True),
        (r"db\..*", "db", "x", True),
        (r"db\..*", "other", "x", False),
        (r"db\.a,db\.b", "db", "b", True),
        (r"db\.a,db\.b", "db", "c", False),
        (r"foo\.bar,foo\.barx", "foo", "barx", True),
    ],
)
def test_filter_table(filter_text, schema, table, expected):
    assert TableFilter(filter_text).matches(schema, table) is expected
