"""Values render as Canal's LogEventConvert renders them (facts from Canal's sources)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from canalbridge.devkit.canal_values import ZERO_DATE, SqlType, render
from canalbridge.mysql_types import MySqlType, canonical

UTC = dt.UTC


@pytest.mark.parametrize(
    "declared, value, text, sql_type",
    [
        ("tinyint(4)", -128, "-128", SqlType.TINYINT),
        ("tinyint(3) unsigned", 100, "100", SqlType.TINYINT),
        ("tinyint(3) unsigned", 200, "200", SqlType.SMALLINT),  # widened only when it must be
        ("smallint(5) unsigned", 65535, "65535", SqlType.INTEGER),
        ("mediumint(8) unsigned", 16777215, "16777215", SqlType.INTEGER),
        ("int(10) unsigned", 4294967295, "4294967295", SqlType.BIGINT),
        ("bigint(20)", -(2**63), "-9223372036854775808", SqlType.BIGINT),
        ("bigint(20) unsigned", 5, "5", SqlType.BIGINT),
        ("bigint(20) unsigned", 2**64 - 1, "18446744073709551615", SqlType.DECIMAL),
        ("decimal(10,2)", Decimal("1.50"), "1.50", SqlType.DECIMAL),
        ("decimal(10,2)", Decimal("-1.50"), "-1.50", SqlType.DECIMAL),
        ("decimal(10,2)", Decimal("1.00"), "1.0", SqlType.DECIMAL),  # all-zero digit group dropped
        ("decimal(10,2)", Decimal("0"), "0.0", SqlType.DECIMAL),
        ("decimal(20,10)", Decimal("1.5"), "1.500000000", SqlType.DECIMAL),
        ("decimal(5,0)", Decimal("-123"), "-123", SqlType.DECIMAL),
        # 65 digits: three full 9-digit fraction groups kept, the all-zero 3-digit rest dropped.
        ("decimal(65,30)", Decimal("-12345678901234567890123456789012345.5"),
         "-12345678901234567890123456789012345.500000000000000000000000000", SqlType.DECIMAL),
        ("float", 1.1, "1.1", SqlType.REAL),
        ("float", 1e10, "1.0E10", SqlType.REAL),
        ("float", 100.0, "100.0", SqlType.REAL),
        ("double", 0.1, "0.1", SqlType.DOUBLE),
        ("double", 1e-5, "1.0E-5", SqlType.DOUBLE),
        ("double", 12345678.0, "1.2345678E7", SqlType.DOUBLE),
        ("char(10)", "ab", "ab", SqlType.CHAR),
        ("char(10)", "ab  ", "ab", SqlType.CHAR),  # the binlog has CHAR without its pad spaces
        ("varchar(32)", "中😀", "中😀", SqlType.VARCHAR),
        ("varchar(32)", "", "", SqlType.VARCHAR),
        ("text", "long text", "long text", SqlType.CLOB),
        ("enum('a','b','c')", "b", "2", SqlType.INTEGER),  # the 1-based index, not the label
        ("enum('a','b','c')", "", "0", SqlType.INTEGER),  # the error value a permissive sql_mode keeps
        ("set('a','b','c')", "a,c", "5", SqlType.BIT),  # the bit mask
        ("json", '{"a": 1}', '{"a": 1}', SqlType.VARCHAR),
        ("varbinary(8)", b"\x00\xff\x41", "\x00\xffA", SqlType.BLOB),  # ISO-8859-1, a char per byte
        ("binary(4)", b"\x01\x02\x03\x04", "\x01\x02\x03\x04", SqlType.BLOB),
        ("binary(4)", b"\xff\x00\x00\x00", "\xff", SqlType.BLOB),  # the binlog drops BINARY's pad bytes
        ("blob", b"", "", SqlType.BLOB),
        ("bit(16)", 258, "258", SqlType.BIT),
        ("bit(64)", 2**64 - 1, "18446744073709551615", SqlType.BIT),
        ("year(4)", 2024, "2024", SqlType.VARCHAR),
        ("year(4)", 0, "0000", SqlType.VARCHAR),
        ("date", dt.date(2024, 2, 29), "2024-02-29", SqlType.DATE),
        ("date", ZERO_DATE, "0000-00-00", SqlType.DATE),
        ("datetime", dt.datetime(2020, 1, 2, 3, 4, 5), "2020-01-02 03:04:05", SqlType.TIMESTAMP),
        ("datetime", dt.datetime(999, 12, 31, 23, 59, 59), "0999-12-31 23:59:59", SqlType.TIMESTAMP),
        ("datetime(3)", dt.datetime(2020, 1, 2, 3, 4, 5, 120000), "2020-01-02 03:04:05.120", SqlType.TIMESTAMP),
        ("datetime(6)", dt.datetime(2020, 1, 2, 3, 4, 5, 1), "2020-01-02 03:04:05.000001", SqlType.TIMESTAMP),
        ("datetime(6)", dt.datetime(2020, 1, 2, 3, 4, 5), "2020-01-02 03:04:05.000000", SqlType.TIMESTAMP),
        ("datetime(3)", ZERO_DATE, "0000-00-00 00:00:00.000", SqlType.TIMESTAMP),
        ("timestamp", dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), "2023-11-14 22:13:20", SqlType.TIMESTAMP),
        ("timestamp(6)", dt.datetime(2023, 11, 14, 22, 13, 20, 123, tzinfo=UTC),
         "2023-11-14 22:13:20.000123", SqlType.TIMESTAMP),
        ("time", dt.timedelta(hours=838, minutes=59, seconds=59), "838:59:59", SqlType.TIME),
        ("time", -dt.timedelta(hours=1, minutes=2, seconds=3), "-01:02:03", SqlType.TIME),
        ("time(6)", dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=4), "01:02:03.000004", SqlType.TIME),
        ("time(6)", -dt.timedelta(seconds=1.5), "-00:00:01.500000", SqlType.TIME),
        ("time(2)", -dt.timedelta(seconds=0.5), "-00:00:00.50", SqlType.TIME),
    ],
)
def test_value_renders_as_canal_sends_it(declared, value, text, sql_type):
    rendered = render(MySqlType.parse(declared), value)
    assert (rendered.text, rendered.sql_type, rendered.is_null) == (text, sql_type, False)


@pytest.mark.parametrize(
    "declared, sql_type",
    [
        ("int(10) unsigned", SqlType.INTEGER),  # NULL is never widened
        ("bigint(20) unsigned", SqlType.BIGINT),
        ("decimal(10,2)", SqlType.DECIMAL),
        ("text", SqlType.CLOB),
        ("blob", SqlType.BLOB),
        ("varbinary(4)", SqlType.BLOB),
        ("set('a')", SqlType.BLOB),  # differs from a non-NULL set's BIT
        ("json", SqlType.OTHER),  # differs from a non-NULL json's VARCHAR
        ("enum('a')", SqlType.INTEGER),
        ("year", SqlType.VARCHAR),
        ("datetime(6)", SqlType.TIMESTAMP),
        ("time", SqlType.TIME),
    ],
)
def test_null_renders_with_canal_null_sql_type(declared, sql_type):
    rendered = render(MySqlType.parse(declared), None)
    assert (rendered.text, rendered.sql_type, rendered.is_null) == ("", sql_type, True)


def test_binary_text_decodes_back_to_the_original_bytes():
    original = bytes(range(256))
    assert render(MySqlType.parse("blob"), original).text.encode("latin-1") == original


def test_type_parsing_keeps_enum_labels_and_precision():
    enum = MySqlType.parse("enum('it''s','a,b')")
    assert enum.labels == ("it's", "a,b")
    assert MySqlType.parse("decimal(30,10)").scale == 10
    assert MySqlType.parse("datetime(3)").fsp == 3
    assert MySqlType.parse("int(10) unsigned zerofill").unsigned


def test_float_near_the_float32_maximum_renders():
    assert render(MySqlType.parse("float"), 3.4028234663852886e38).text == "3.4028235E38"


# (a DDL's spelling, as SHOW CREATE TABLE spells the same type)
SPELLINGS = [
    ("INT", "int(11)"), ("INTEGER", "int(11)"), ("BIGINT UNSIGNED", "bigint(20) unsigned"),
    ("int(10) unsigned zerofill", "int(10) unsigned"), ("BOOLEAN", "tinyint(1)"), ("VARCHAR(64)", "varchar(64)"),
    ("DECIMAL", "decimal(10,0)"), ("NUMERIC(12, 2)", "decimal(12,2)"), ("dec(5)", "decimal(5,0)"),
    ("ENUM('new', 'paid')", "enum('new','paid')"), ("DATETIME(3)", "datetime(3)"), ("REAL", "double"),
    ("DOUBLE PRECISION", "double"), ("CHAR", "char(1)"), ("BIT", "bit(1)"), ("YEAR", "year(4)"),
    ("DATETIME(0)", "datetime"), ("FLOAT(10)", "float"), ("FLOAT(30)", "double"),
]


@pytest.mark.parametrize("ddl, shown", SPELLINGS)
def test_a_type_is_spelled_one_way_whichever_way_its_ddl_spelled_it(ddl, shown):
    assert canonical(ddl) == canonical(shown)


@pytest.mark.parametrize("ddl, base", [("INTEGER", "int"), ("BOOLEAN", "tinyint"), ("NUMERIC(12, 2)", "decimal"),
                                       ("REAL", "double")])
def test_a_type_parses_to_the_name_mysql_stores_it_under(ddl, base):
    assert MySqlType.parse(ddl).base == base


def test_spellings_of_other_types_stay_apart():
    assert canonical("varchar(8)") != canonical("varchar(20)")
    assert canonical("int") != canonical("int unsigned")
    assert canonical("decimal(12,2)") != canonical("decimal(12,3)")
    assert canonical("enum('a','b')") != canonical("enum('a', 'b c')")
    assert canonical("enum('A','b')") != canonical("enum('a','b')")  # a label's case is the label's
