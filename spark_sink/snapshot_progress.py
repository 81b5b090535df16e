"""How far a job's snapshot of each source table came, read from a target without opening its channel: for the
tables a rule takes, whose channels open only when the stream (or their first chunk) meets them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from canalbridge.sync.snapshot.progress import TableProgress
from spark_sink.session import make_active
from spark_sink.stamp import read_stamp
from spark_sink.table import TargetTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkProgressReader:
    """``reader(target)``: the snapshot progress, by ``schema.table``, in the newest commit of ``job`` in
    ``target``'s main lineage (empty: no such table, or no commit of the job yet). Read-only: a channel's own
    reader also resets what its writer carries, and may run at the same time."""

    def __init__(self, spark: Callable[[], SparkSession], job: str) -> None:
        self._spark = spark
        self._job = job

    def __call__(self, target: str) -> Mapping[str, TableProgress]:
        spark = self._spark()
        make_active(spark)
        table = TargetTable(spark, target)
        if table.columns() is None:
            return {}
        spark.sql(f"REFRESH TABLE {table.identifier}")  # (the catalog caches a table's metadata)
        stamp = read_stamp(table, self._job)
        return {} if stamp is None else stamp.snapshot
