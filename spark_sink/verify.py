"""``canalbridge verify``'s comparison in Spark: an upsert target against a chunk read from its source.

The chunk's text is typed the way a chunk the snapshot applies is
(:func:`~spark_sink.types.convert`), then cast to the target's column types
(the target may have widened a column since), so both sides hold the values
a commit would write. The target is read at main's snapshot as it stands
when the comparison begins (the keys the verify's window noted are asked
for after that, so they cover every change that snapshot holds), and rows
compare whole: a key whose row is in one side only, or differs in any
column both sides have, differs.

Which target rows belong to the chunk: for a key of integer or decimal
columns, those in the chunk's key range, so that a row the target holds and
the source lacks is found. Other keys order differently in MySQL (its
collation) and in Spark (bytes), so there only the target rows of keys the
chunk read are compared: a row the source no longer has is not found.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from canalbridge.mysql_types import MySqlType
from canalbridge.source_db import KeyRange, KeyValues, TableKey
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.snapshot.chunk_window import CanalKey
from canalbridge.sync.snapshot.source import Differing
from spark_sink.session import make_active
from spark_sink.table import TargetTable
from spark_sink.types import convert

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

COUNTED = 1000  # differing keys a chunk's comparison collects (more are counted apart)
_ORDERED_ALIKE = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric"}


class SparkComparer:
    """A :class:`~canalbridge.sync.snapshot.source.TargetComparer` over Iceberg tables, with the daemon's Spark
    session."""

    def __init__(self, spark: Callable[[], SparkSession]) -> None:
        self._spark = spark

    def differing(self, target: str, key: TableKey, columns: Sequence[SourceColumn], ranges: Sequence[KeyRange],
                  rows: object, noted: Callable[[], frozenset[CanalKey]], sample: int) -> Differing:
        from pyspark.sql import functions as F

        spark = self._spark()
        make_active(spark)  # (this thread's casts with the session's settings, ANSI on, as a writer's)
        table = TargetTable(spark, target)
        source: DataFrame = rows  # type: ignore[assignment]  # (the chunk reader's handle: c0..., spark_sink.source_text)
        typed = [convert(F.col(f"c{index}"), column.mysql_type).alias(column.name)
                 for index, column in enumerate(columns)]
        source = source.select(*typed)
        names = [column.name for column in columns]
        keys = _named(names, key.names)
        main = []
        if table.columns() is not None:  # (a target not created yet holds no row)
            spark.sql(f"REFRESH TABLE {table.identifier}")
            main = spark.sql(f"SELECT snapshot_id FROM {table.identifier}.refs WHERE name = 'main'").collect()
        changed = noted()  # (after the snapshot compared is fixed: every change it holds is noted by now)
        if not main:  # nothing committed yet: every row read differs, but for the keys changed meanwhile
            found = source.select(*keys)
            if changed:
                found = found.join(_noted(spark, changed, keys, None, columns), on=keys, how="left_anti")
        else:
            held = spark.sql(f"SELECT * FROM {table.identifier} VERSION AS OF {main[0]['snapshot_id']}")
            types = {field.name.lower(): field.dataType for field in held.schema.fields}
            both = [name for name in names if name.lower() in types]
            source = source.select(*[F.col(_q(name)).cast(types[name.lower()]).alias(name) for name in both])
            held = held.select(*[F.col(_q(name)).alias(name) for name in both])
            if all(_ordered_alike(column) for column in columns if column.name in keys):
                held = held.where(functools.reduce(lambda one, other: one | other,
                                                   [_in_range(keys, each) for each in ranges]))
            else:
                held = held.join(source.select(*keys), on=keys, how="left_semi")
            if changed:
                gone = _noted(spark, changed, keys, [types[name.lower()] for name in keys], columns)
                source = source.join(gone, on=keys, how="left_anti")
                held = held.join(gone, on=keys, how="left_anti")
            found = source.exceptAll(held).select(*keys).unionByName(held.exceptAll(source).select(*keys))
        distinct = found.distinct()
        # One Spark job when few keys differ (an equal chunk, most often); a count of its own only past that.
        shown = distinct.orderBy(*keys).limit(COUNTED).collect()
        count = len(shown) if len(shown) < COUNTED else distinct.count()
        return Differing(count, tuple(", ".join(str(value) for value in row) for row in shown[:sample]))


def _named(names: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The columns of ``wanted`` as the read names them (names compare without case, as MySQL's do)."""
    by_lower = {name.lower(): name for name in names}
    return [by_lower[name.lower()] for name in wanted]


def _q(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


def _ordered_alike(column: SourceColumn) -> bool:
    """Whether MySQL and Spark order the column's values alike (numbers do; text and bytes need not)."""
    return MySqlType.parse(column.mysql_type).base in _ORDERED_ALIKE


def _in_range(keys: Sequence[str], range_: KeyRange) -> Column:
    """The rows whose key is after ``range_.after`` and through ``range_.through`` (row values compared)."""
    from pyspark.sql import functions as F

    condition = F.lit(True)
    if range_.after is not None:
        condition = condition & _compare(keys, range_.after, strict=True, above=True)
    if range_.through is not None:
        condition = condition & _compare(keys, range_.through, strict=False, above=False)
    return condition


def _compare(keys: Sequence[str], values: KeyValues, *, strict: bool, above: bool) -> Column:
    """``keys`` against ``values`` as a row value: above (or below) it, or equal when not ``strict``."""
    from pyspark.sql import functions as F

    terms = []
    for index, (name, value) in enumerate(zip(keys, values)):
        column, last = F.col(_q(name)), index == len(keys) - 1
        if last and not strict:
            term = column >= F.lit(value) if above else column <= F.lit(value)
        else:
            term = column > F.lit(value) if above else column < F.lit(value)
        for before, equal in zip(keys[:index], values[:index]):
            term = term & (F.col(_q(before)) == F.lit(equal))
        terms.append(term)
    return functools.reduce(lambda one, other: one | other, terms)


def _noted(spark: SparkSession, changed: frozenset[CanalKey], keys: Sequence[str], types: Sequence[Any] | None,
           columns: Sequence[SourceColumn]) -> DataFrame:
    """The keys the window noted (Canal's text), typed as the source's key columns are, then cast to ``types``
    (the target's; None: no target yet)."""
    from pyspark.sql import functions as F

    by_name = {column.name: column for column in columns}
    texts = spark.createDataFrame(sorted(changed, key=repr),
                                  schema=", ".join(f"{_q(name)} string" for name in keys))
    typed = [convert(F.col(_q(name)), by_name[name].mysql_type) for name in keys]
    if types is not None:
        typed = [column.cast(kind) for column, kind in zip(typed, types)]
    return texts.select(*[column.alias(name) for column, name in zip(typed, keys)])
