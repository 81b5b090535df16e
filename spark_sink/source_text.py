"""A source table's columns read over JDBC as the text Canal sends, so a snapshot's rows convert as the stream's.

A snapshot's chunk and the stream's changes of the same row must land in
the target as the same values, and the stream's go through one conversion
(:func:`spark_sink.types.convert`) from Canal's text. So a chunk is read as
that text, then converted the same way. Mostly MySQL renders it
(``CAST(... AS CHAR)``); where Canal's text is not MySQL's, the read says
how it differs:

| MySQL | read as | why |
| --- | --- | --- |
| enum, set, bit | ``col + 0`` as text | Canal sends the index, the bit mask, the number |
| float, double | the value, then Java's text in Spark | MySQL prints a FLOAT with 6 digits |
| binary(n) | the bytes less trailing 0x00, as ISO-8859-1 text | Canal drops BINARY's pad bytes |
| varbinary, blob, geometry | the bytes as ISO-8859-1 text | Canal's one char per byte |
| decimal wider than 38 digits | MySQL's text less an all-zero last digit group | stored as text; Canal drops it |
| timestamp | text in UTC (the session's zone) | Canal renders it in its JVM zone, UTC |

The JDBC connection uses the server's binary protocol (server-side
prepared statements), so a FLOAT or DOUBLE reaches Spark as the value
stored, not as MySQL's text of it.
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


def source_select(column: str, mysql_type: str) -> str:
    """The SELECT expression that reads ``column`` of ``mysql_type`` for :func:`canal_text`; a type with no
    mapping raises :class:`~spark_sink.types.UnsupportedTypeError`, as its stream rows would."""
    spark_type(mysql_type)
    base = MySqlType.parse(mysql_type).base
    name = quote(column)
    if base in _AS_NUMBER:
        return f"CAST({name} + 0 AS CHAR)"
    if base in _AS_VALUE or base in _BYTES:
        return name
    return f"CAST({name} AS CHAR)"


def canal_text(read: Column, mysql_type: str) -> Column:
    """What :func:`source_select` read, as the text Canal sends for the value (NULL stays NULL)."""
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
