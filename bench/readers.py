"""What readers pay for a benchmark's tables: a full scan, the files it opens, and the same after compaction."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spark_sink.maintainer import compact, live_files
from spark_sink.table import TargetTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def scan_seconds(spark: SparkSession, tables: Sequence[str]) -> float:
    """Seconds to read every column of every row of ``tables``, deletes applied (the second of two scans)."""
    seconds = 0.0
    for _ in range(2):
        started = time.perf_counter()
        for table in tables:
            spark.table(table).write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - started
    return round(seconds, 2)


def files(spark: SparkSession, tables: Sequence[str]) -> dict[str, int]:
    """The live files of ``tables`` by kind, and their snapshots, summed."""
    counts = {"data_files": 0, "position_delete_files": 0, "equality_delete_files": 0, "snapshots": 0}
    for table in tables:
        live = live_files(TargetTable(spark, table))
        counts["data_files"] += live.data
        counts["position_delete_files"] += live.position_deletes
        counts["equality_delete_files"] += live.equality_deletes
        counts["snapshots"] += int(spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").collect()[0].n)
    return counts


def reading_cost(spark: SparkSession, tables: Sequence[str]) -> dict[str, Any]:
    """A full scan of ``tables`` (seconds, warm) and their files, then the same after the compaction the
    daemon's maintenance runs."""
    before = {"scan_s": scan_seconds(spark, tables), **files(spark, tables)}
    started = time.perf_counter()
    for table in tables:
        compact(TargetTable(spark, table))
    compaction_s = time.perf_counter() - started
    after = {"scan_s": scan_seconds(spark, tables), **files(spark, tables)}
    return {"before_compaction": before, "compaction_s": round(compaction_s, 1), "after_compaction": after}
