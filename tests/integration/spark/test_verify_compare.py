"""verify's comparison in Spark: the rows read from a source (Canal's text) against an upsert target, typed as a
commit types them, leaving out the keys the stream changed meanwhile."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from canalbridge.source_db import KeyRange, TableKey
from canalbridge.source_db.chunks import KeyColumn
from canalbridge.sync.model.changes import SourceColumn
from spark_sink.identifiers import quote_table
from spark_sink.verify import SparkComparer

COLUMNS = (SourceColumn("id", "int(11)", 4, True), SourceColumn("price", "decimal(6,2)", 3, False),
           SourceColumn("name", "varchar(8)", 12, False))
KEY = TableKey("db", "t", (KeyColumn("id", "int"),))
RANGES = [KeyRange((0,), (10,))]


def read(spark, *rows: tuple[str, str | None, str]):
    """A chunk as the chunk reader holds it: each column's text in c0..."""
    return spark.createDataFrame(list(rows), "c0 string, c1 string, c2 string")


@pytest.fixture
def target(spark) -> str:
    name = "lake.verify_db.t"
    spark.sql(f"DROP TABLE IF EXISTS {quote_table(name)}")
    spark.sql(f"CREATE TABLE {quote_table(name)} (id INT, price DECIMAL(6,2), name STRING) USING iceberg")
    spark.createDataFrame([(1, D("1.50"), "a"), (2, D("2.00"), "b"), (3, None, "c"), (12, D("9.99"), "past")],
                          "id int, price decimal(6,2), name string").writeTo(quote_table(name)).append()
    return name


def test_equal_rows_compare_equal_whatever_the_text_of_their_numbers(spark, target):
    found = SparkComparer(lambda: spark).differing(
        target, KEY, COLUMNS, RANGES, read(spark, ("1", "1.5", "a"), ("2", "2.00", "b"), ("3", None, "c")),
        frozenset, 10)
    assert (found.keys, found.sample) == (0, ())  # (key 12 is past the range: not compared)


def test_a_changed_row_a_missing_row_and_a_row_the_source_lacks_differ_unless_the_stream_changed_them(spark, target):
    chunk = read(spark, ("1", "1.50", "A"), ("3", None, "c"), ("4", "4.00", "new"))  # 1 changed, 2 gone, 4 missing
    compare = SparkComparer(lambda: spark).differing
    found = compare(target, KEY, COLUMNS, RANGES, chunk, frozenset, 10)
    assert (found.keys, found.sample) == (3, ("1", "2", "4"))
    noted = compare(target, KEY, COLUMNS, RANGES, chunk, lambda: frozenset({("1",), ("4",)}), 1)
    assert (noted.keys, noted.sample) == (1, ("2",))


def test_a_target_not_created_yet_differs_in_every_key_read(spark):
    found = SparkComparer(lambda: spark).differing(
        "lake.verify_db.absent", KEY, COLUMNS, RANGES, read(spark, ("1", "1.50", "a"), ("2", "2.00", "b")),
        lambda: frozenset({("2",)}), 10)
    assert (found.keys, found.sample) == (1, ("1",))
