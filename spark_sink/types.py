"""Typed conversion: Canal's text values into Spark/Iceberg types, as Spark column expressions.

Rows are staged as text exactly as Canal sent them; conversion happens in
Spark, a whole column at a time, with ANSI casts so that text that is not a
value of its type fails the commit with the value in the message instead of
becoming NULL.

| MySQL | Iceberg / Spark |
| --- | --- |
| tinyint, smallint, mediumint, int (signed or unsigned but int) | int |
| int unsigned, bigint | bigint |
| bigint unsigned | decimal(20,0) |
| decimal(p,s), p <= 38 | decimal(p,s) (wider: string, Iceberg stops at 38) |
| float / double | float / double |
| char, varchar, text, json, time | string |
| enum | string: the label (Canal sends the 1-based index) |
| set | string: the labels, comma-separated (Canal sends the bit mask) |
| binary, varbinary, blob | binary: Canal's ISO-8859-1 text turned back into the bytes |
| bit(n) | bigint (bit(64): decimal(20,0)) |
| year | int |
| date | date |
| datetime(fsp) | timestamp_ntz, fraction kept |
| timestamp(fsp) | timestamp (Canal renders it in its JVM zone: run Canal in UTC) |

MySQL zero dates (``0000-00-00``, and dates with a zero month or day) become
NULL. NULL stays NULL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from canalbridge.mysql_types import MySqlType
from spark_sink.errors import UnsupportedTypeError

if TYPE_CHECKING:
    from pyspark.sql import Column

_SMALL_INTS = {"tinyint", "smallint", "mediumint"}
_TEXT = {"char", "varchar", "text", "tinytext", "mediumtext", "longtext", "json", "time"}
_BINARY = {"binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob", "geometry"}
MAX_DECIMAL_PRECISION = 38


def spark_type(mysql_type: str) -> str:
    """The Spark SQL type (as DDL text) a column of ``mysql_type`` is stored as."""
    parsed = MySqlType.parse(mysql_type)
    base = parsed.base
    if base in _SMALL_INTS:
        return "int"
    if base == "int":
        return "bigint" if parsed.unsigned else "int"
    if base == "bigint":
        return "decimal(20,0)" if parsed.unsigned else "bigint"
    if base == "decimal":
        precision = int(parsed.args[0]) if parsed.args else 10
        if precision > MAX_DECIMAL_PRECISION:
            return "string"
        return f"decimal({precision},{parsed.scale})"
    if base in ("float", "double"):
        return base
    if base in _TEXT or base in ("enum", "set"):
        return "string"
    if base in _BINARY:
        return "binary"
    if base == "bit":
        width = int(parsed.args[0]) if parsed.args else 1
        return "decimal(20,0)" if width == 64 else "bigint"
    if base == "year":
        return "int"
    if base == "date":
        return "date"
    if base == "datetime":
        return "timestamp_ntz"
    if base == "timestamp":
        return "timestamp"
    raise UnsupportedTypeError(f"no Spark type for MySQL type {mysql_type!r}")


def _bit(index: int) -> int:
    """Bit ``index`` of a signed 64-bit mask (bit 63 is the sign bit)."""
    return -(1 << 63) if index == 63 else 1 << index


def convert(text: Column, mysql_type: str) -> Column:
    """The expression turning Canal's text column ``text`` into its typed value."""
    from pyspark.sql import functions as F

    parsed = MySqlType.parse(mysql_type)
    base = parsed.base
    target = spark_type(mysql_type)
    if base == "enum":
        labels = F.array(*[F.lit(label) for label in parsed.labels])
        index = text.cast("int")
        # The explicit NULL branch is needed: Spark 3.5.7 answers element_at(literal
        # array, NULL) with the array's last element instead of NULL.
        return (
            F.when(text.isNull(), F.lit(None).cast("string"))
            .when(index == 0, F.lit(""))
            .otherwise(F.element_at(labels, index))
        )
    if base == "set":
        mask = text.cast("long")
        # concat_ws skips NULLs: each member contributes its label only when its bit is set.
        members = [
            F.when(mask.bitwiseAND(F.lit(_bit(index)).cast("long")) != 0, F.lit(label))
            for index, label in enumerate(parsed.labels)
        ]
        return F.when(text.isNull(), F.lit(None)).otherwise(F.concat_ws(",", *members))
    if base in _BINARY:
        return F.encode(text, "ISO-8859-1")
    if base == "date":
        zero = text.rlike(r"^\d{4}-(00-\d{2}|\d{2}-00)")
        return F.when(zero, F.lit(None).cast("date")).otherwise(text.cast("date"))
    if base in ("datetime", "timestamp"):
        zero = text.rlike(r"^\d{4}-(00-\d{2}|\d{2}-00) ")
        return F.when(zero, F.lit(None).cast(target)).otherwise(text.cast(target))
    return text.cast(target)
