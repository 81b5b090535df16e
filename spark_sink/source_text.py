"""A source table's columns read over JDBC as the stream's conversion takes them: Canal's text, or the value.

A snapshot's chunk and the stream's changes of the same row must land in
the target as the same values, and the stream's go through one conversion
(:func:`spark_sink.types.convert`) from Canal's text. So a chunk is read as
that text, then converted the same way; or, where the driver's value is the
very value that conversion gives, as that value (no text on the wire,
nothing to parse: ``make bench-snapshot``). Mostly MySQL renders the text
(``CAST(... AS CHAR)``); where Canal's text is not MySQL's, the read says
how it differs:

| MySQL | read as | why |
| --- | --- | --- |
| smallint, mediumint, int, bigint (signed or not) | the value | the driver's integer is the value |
| decimal up to 38 digits | the value | the driver's decimal is exact |
| varchar, text (not binary) | the value | the driver's string is MySQL's text |
| tinyint, year, char | text | the driver reads TINYINT(1) as a boolean, YEAR as a date; Spark pads a CHAR |
| enum, set, bit | ``col + 0`` as text | Canal sends the index, the bit mask, the number |
| float, double | the value, then Java's text in Spark | MySQL prints a FLOAT with 6 digits |
| binary(n) | the bytes less trailing 0x00, as ISO-8859-1 text | Canal drops BINARY's pad bytes |
| varbinary, blob, geometry | the bytes as ISO-8859-1 text | Canal's one char per byte |
| decimal wider than 38 digits | MySQL's text less an all-zero last digit group | stored as text; Canal drops it |
| timestamp | text in UTC (the session's zone) | Canal renders it in its JVM zone, UTC |
| date, datetime, time, MySQL's json | text | zero dates, zones, JSON's layout (MariaDB's JSON: longtext) |

The JDBC connection uses the server's binary protocol (server-side
prepared statements), so a FLOAT or DOUBLE reaches Spark as the value
stored, not as MySQL's text of it. ``tests/integration/real/test_chunk_read.py``
compares, for every type, a chunk's converted rows with real Canal's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from canalbridge.mysql_types import DECIMAL_GROUP, MySqlType
from canalbridge.source_db.chunks import quote
from spark_sink.types import spark_type

if TYPE_CHECKING:
    from pyspark.sql import Column

_AS_NUMBER = {"enum", "set", "bit"}
_AS_VALUE = {"float", "double"}
_BYTES = {"binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob", "geometry"}
# The driver's value is the converted value: Spark reads these as their target type, and the conversion's cast
# of them changes nothing.
_AS_TYPED = {"smallint", "mediumint", "int", "bigint", "varchar", "text", "tinytext", "mediumtext", "longtext"}


def source_select(column: str, mysql_type: str) -> str:
    """The SELECT expression that reads ``column`` of ``mysql_type`` for :func:`canal_text`; a type with no
    mapping raises :class:`~spark_sink.errors.UnsupportedTypeError`, as its stream rows would."""
    target = spark_type(mysql_type)
    base = MySqlType.parse(mysql_type).base
    name = quote(column)
    if base in _AS_NUMBER:
        return f"CAST({name} + 0 AS CHAR)"
    if base in _AS_VALUE or base in _BYTES or base in _AS_TYPED or (base == "decimal" and target != "string"):
        return name
    return f"CAST({name} AS CHAR)"


def canal_text(read: Column, mysql_type: str) -> Column:
    """What :func:`source_select` read, as the text Canal sends for the value, or as the value where it was read
    as one (NULL stays NULL): either way, what :func:`spark_sink.types.convert` takes."""
    from pyspark.sql import functions as F

    parsed = MySqlType.parse(mysql_type)
    base = parsed.base
    if base in _AS_VALUE:
        return read.cast(base).cast("string")
    if base == "decimal" and spark_type(mysql_type) == "string":
        # Kept as text, so as Canal writes it: MySQL prints every digit of the scale, Canal drops the last
        # (partial) group of fraction digits when it is all zeros, leaving at least one digit.
        leftover = parsed.scale % DECIMAL_GROUP
        if not leftover:
            return read
        return F.regexp_replace(F.regexp_replace(read, f"0{{{leftover}}}$", ""), r"\.$", ".0")
    if base == "binary":
        # Trailing 00 pairs of the hex text: a match must end at the end, so it starts on a byte.
        return F.decode(F.unhex(F.regexp_replace(F.hex(read), "(00)+$", "")), "ISO-8859-1")
    if base in _BYTES:
        return F.decode(read, "ISO-8859-1")
    return read
