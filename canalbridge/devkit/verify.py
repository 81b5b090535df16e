"""Check an Iceberg table against the workload generator's expected table (demo and tests).

The expectation is written from the type table in spark_sink/types.py,
independently of its Spark expressions: logical MySQL value -> the Python
value Spark returns.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Mapping
from decimal import Decimal, localcontext
from typing import TYPE_CHECKING, Any

from canalbridge.devkit.canal_values import ZERO_DATE, format_time
from canalbridge.devkit.entries import TableDef
from canalbridge.mysql_types import MySqlType
from spark_sink.identifiers import quote, quote_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def typed(value: Any, declared: str) -> object:
    """The value Spark should read back for a logical MySQL value."""
    if value is None:
        return None
    mysql_type = MySqlType.parse(declared)
    base = mysql_type.base
    if value is ZERO_DATE:
        return None
    if base == "bigint" and mysql_type.unsigned:
        return Decimal(int(value))
    if base == "decimal":
        precision = int(mysql_type.args[0])
        if precision > 38:
            return str(value)
        with localcontext() as context:
            context.prec = 80
            return Decimal(value).quantize(Decimal(1).scaleb(-mysql_type.scale))
    if base == "float":
        return struct.unpack(">f", struct.pack(">f", float(value)))[0]
    if base == "bit":
        return Decimal(int(value)) if mysql_type.args and int(mysql_type.args[0]) == 64 else int(value)
    if base == "time":
        return format_time(value, mysql_type.fsp)
    if base == "timestamp":
        return (value - EPOCH) // dt.timedelta(microseconds=1)  # read back as unix micros
    if base in ("binary", "varbinary", "blob"):
        return bytes(value)
    return value


def read_typed(spark: SparkSession, target: str, table: TableDef) -> dict[tuple, dict[str, object]]:
    """The target's rows keyed by primary key, timestamps as unix micros, binary as bytes."""
    from pyspark.sql import functions as F

    columns = []
    for column in table.columns:
        expression = F.col(quote(column.name))
        if column.mysql_type.base == "timestamp":
            expression = F.unix_micros(expression)
        columns.append(expression.alias(column.name))
    rows = spark.table(quote_table(target)).select(*columns).collect()
    result = {}
    for row in rows:
        values = {name: (bytes(v) if isinstance(v, (bytearray, memoryview)) else v) for name, v in row.asDict().items()}
        result[tuple(values[name] for name in table.key_names)] = values
    return result


def expected_typed(table: TableDef, rows: Iterable[Mapping[str, object]]) -> dict[tuple, dict[str, object]]:
    result = {}
    for row in rows:
        values = {c.name: typed(row[c.name], c.mysql_type.declared) for c in table.columns}
        result[tuple(values[name] for name in table.key_names)] = values
    return result
