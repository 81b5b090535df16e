"""What a snapshot selects from the source per column type, to read it as the text Canal sends."""

from __future__ import annotations

import pytest

from spark_sink.errors import UnsupportedTypeError
from spark_sink.source_text import source_select


@pytest.mark.parametrize(("mysql_type", "sql"), [
    ("int(11)", "`c`"),  # the driver's value is the converted value: no text on the wire
    ("bigint(20) unsigned", "`c`"),
    ("decimal(12,2)", "`c`"),
    ("varchar(32)", "`c`"),
    ("tinyint(1)", "CAST(`c` AS CHAR)"),  # the driver's TINYINT(1) is a boolean
    ("year", "CAST(`c` AS CHAR)"),  # its YEAR a date
    ("char(8)", "CAST(`c` AS CHAR)"),  # Spark pads a CHAR read as such to its length
    ("decimal(65,30)", "CAST(`c` AS CHAR)"),  # kept as Canal's text: wider than Iceberg's decimals
    ("datetime(6)", "CAST(`c` AS CHAR)"),
    ("json", "CAST(`c` AS CHAR)"),
    ("enum('a','b')", "CAST(`c` + 0 AS CHAR)"),  # Canal sends the index
    ("set('a','b')", "CAST(`c` + 0 AS CHAR)"),  # the bit mask
    ("bit(12)", "CAST(`c` + 0 AS CHAR)"),
    ("float", "`c`"),  # the value: MySQL's text of a FLOAT has 6 digits
    ("double", "`c`"),
    ("binary(4)", "`c`"),  # the bytes: Spark turns them into Canal's ISO-8859-1 text
    ("blob", "`c`"),
    ("geometry", "`c`"),
])
def test_each_type_is_selected_as_its_value_or_as_canal_renders_it(mysql_type, sql):
    assert source_select("c", mysql_type) == sql


def test_a_type_with_no_mapping_is_refused_as_its_stream_rows_are():
    with pytest.raises(UnsupportedTypeError, match="uuid"):
        source_select("c", "uuid")
