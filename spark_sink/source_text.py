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
| varbinary, blob | the bytes as ISO-8859-1 text | Canal's one char per byte |
| timestamp | text in UTC (the session's zone) | Canal renders it in its JVM zone, UTC |

The JDBC connection uses the server's binary protocol (server-side
prepared statements), so a FLOAT or DOUBLE reaches Spark as the value
stored, not as MySQL's text of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from canalbridge.mysql_types import MySqlType
from canalbridge.source_db.chunks import quote

if TYPE_CHECKING:
    from pyspark.sql import Column

_AS_NUMBER = {"enum", "set", "bit"}
_AS_VALUE = {"float", "double"}
_BYTES = {"binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob"}


def source_select(column: str, mysql_type: str) -> str:
    """The SELECT expression that reads ``column`` of ``mysql_type`` for :func:`canal_text`."""
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

    base = MySqlType.parse(mysql_type).base
    if base in _AS_VALUE:
        return read.cast(base).cast("string")
    if base == "binary":
        # Trailing 00 pairs of the hex text: a match must end at the end, so it starts on a byte.
        return F.decode(F.unhex(F.regexp_replace(F.hex(read), "(00)+$", "")), "ISO-8859-1")
    if base in _BYTES:
        return F.decode(read, "ISO-8859-1")
    return read
