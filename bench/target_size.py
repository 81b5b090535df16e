"""Commit cost against target size: one upsert commit of N changes into tables of growing size (Spark local[2]).

For each write path (``[spark] upsert_deletes``: ``position``, whose DELETE
reads the target's key column, and ``equality``, the default with the
decoder jar, which writes equality deletes and reads nothing) and each target size, a 10-column
table is created by the Iceberg upsert writer (so it gets the layout the
daemon gives new tables), filled to the size by Spark in one append, and
then takes one warm-up commit and ``--commits`` counted commits through the
writer, each of ``--changes`` row changes: 60% updates of keys spread over
the whole table, 30% inserts, 10% deletes. Prints one JSON line per commit
(seconds, and the Spark JVM's CPU seconds), one per path and size (with its
row count checked against the changes, and what a reader pays: a full scan
before and after the daemon's compaction), then a summary line with each
path's ratio of the largest size's median commit to the smallest's (issue
37's target: at most 1.2).

    .venv/bin/python -m bench.target_size --sizes 100000,10000000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time

from bench.common import bench_row, cpu_seconds, local_spark_settings, spark_pid
from bench.readers import reading_cost
from canalbridge.daemon.logs import configure_logging
from canalbridge.devkit.catalog import narrow_table
from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings
from spark_sink.session import get_spark, stop_spark
from spark_sink.sink import make_writer
from spark_sink.writer import IcebergWriter

TABLE = narrow_table(columns=10)
SEND_ROWS = 5000  # rows per send, as a channel would hand them over


class Changes:
    """Batches of changes against a table filled with keys 0..size-1; knows how many rows it leaves."""

    def __init__(self, size: int, seed: int = 1) -> None:
        self.size = size
        self.rows = size  # rows in the table once every batch so far is committed
        self._rng = random.Random(seed)
        self._deleted: set[int] = set()
        self._next_key = size

    def batch(self, count: int, offset: int) -> list[ChangeRow]:
        """``count`` changes on distinct keys: updates and deletes of rows there, inserts of new keys."""
        position = EntryPosition("mysql-bin.000001", offset)
        updates, deletes = int(count * 0.6), int(count * 0.1)
        touched: set[int] = set()
        while len(touched) < updates + deletes:
            key = self._rng.randrange(self.size)
            if key not in self._deleted:
                touched.add(key)
        keys = list(touched)
        self._deleted.update(keys[updates:])
        inserts = range(self._next_key, self._next_key + count - updates - deletes)
        self._next_key += len(inserts)
        self.rows += len(inserts) - deletes
        rows = [ChangeRow(ChangeKind.UPDATE_AFTER, bench_row(key, offset), position) for key in keys[:updates]]
        rows += [ChangeRow(ChangeKind.DELETE, bench_row(key, offset), position) for key in keys[updates:]]
        rows += [ChangeRow(ChangeKind.INSERT, bench_row(key, offset), position) for key in inserts]
        self._rng.shuffle(rows)
        return rows


def timed_commit(writer: IcebergWriter, rows: list[ChangeRow], label: str, offset: int) -> float:
    """Stage ``rows`` through the writer as a channel would, then commit them; the commit's seconds."""
    columns = tuple(SourceColumn(c.name, c.mysql_type.declared, 0, c.is_key) for c in TABLE.columns)
    names = tuple(c.name for c in TABLE.columns)
    writer.begin()
    for index in range(0, len(rows), SEND_ROWS):
        writer.send(RowBatch(TABLE.qualified, names, columns, (0,), tuple(rows[index:index + SEND_ROWS])))
    started = time.perf_counter()
    writer.commit(EntryPosition("mysql-bin.000001", offset), label)
    return time.perf_counter() - started


def fill(spark, table: str, start: int, end: int) -> None:
    """Append keys start..end-1 with values of each column's type, in one Spark job."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, TimestampNTZType, TimestampType

    columns = []
    for field in spark.table(table).schema.fields:
        if field.name == "id":
            columns.append(F.col("id").cast(field.dataType).alias("id"))
        elif isinstance(field.dataType, StringType):
            columns.append(F.concat(F.lit(f"{field.name}-"), F.col("id").cast("string")).alias(field.name))
        elif isinstance(field.dataType, (TimestampType, TimestampNTZType)):
            columns.append(F.lit("2024-05-06 07:08:09.123").cast(field.dataType).alias(field.name))
        else:
            columns.append((F.col("id") % 100000).cast(field.dataType).alias(field.name))
    spark.range(start, end).select(*columns).writeTo(table).append()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,10000000")
    parser.add_argument("--changes", type=int, default=50000)
    parser.add_argument("--commits", type=int, default=3)
    parser.add_argument("--upsert-deletes", default="position,equality",
                        help="the write paths to measure, comma-separated")
    args = parser.parse_args()
    configure_logging("warning")
    root = tempfile.mkdtemp(prefix="canalbridge-bench-target-size-")
    spark = get_spark(local_spark_settings(root))
    jvm = spark_pid(spark)
    summary: dict[str, object] = {"benchmark": "target_size", "changes": args.changes}
    exact_by_run: dict[str, bool] = {}
    for path in args.upsert_deletes.split(","):
        settings = local_spark_settings(root, upsert_deletes=path)
        medians: dict[int, float] = {}
        for size in (int(s) for s in args.sizes.split(",")):
            target = f"lake.bench.{path}_{size}"
            writer = make_writer(spark, ChannelSettings(TABLE.qualified, target), "bench", settings)
            # The writer creates the table with its first commit; Spark fills it to the size.
            offset = 4
            timed_commit(writer, [ChangeRow(ChangeKind.INSERT, bench_row(0, 0),
                                            EntryPosition("mysql-bin.000001", 1))], "create", offset)
            print(f"{path}: filling {target} to {size:,} rows", flush=True)
            started = time.perf_counter()
            fill(spark, target, 1, size)
            print(f"filled in {time.perf_counter() - started:.1f} s", flush=True)
            made, seconds, jvm_cpu = Changes(size), [], []
            for number in range(args.commits + 1):  # commit 0 warms the JVM and the table's caches up
                offset += 1000
                cpu_before = cpu_seconds(jvm)
                took = timed_commit(writer, made.batch(args.changes, offset), f"bench-{number}", offset)
                cpu = cpu_seconds(jvm) - cpu_before
                if number:
                    seconds.append(took)
                    jvm_cpu.append(cpu)
                print(json.dumps({"upsert_deletes": path, "table_rows": size, "commit": number,
                                  "warm_up": not number, "changes": args.changes, "commit_s": round(took, 2),
                                  "spark_jvm_cpu_s": round(cpu, 2)}), flush=True)
            medians[size] = round(statistics.median(seconds), 2)
            exact = exact_by_run[f"{path}_{size}"] = spark.table(target).count() == made.rows
            readers = reading_cost(spark, [target])
            print(json.dumps({"upsert_deletes": path, "table_rows": size, "median_commit_s": medians[size],
                              "median_spark_jvm_cpu_us_per_change":
                                  round(statistics.median(jvm_cpu) / args.changes * 1e6, 1),
                              "rows_after": made.rows, "exact": exact, "readers": readers}), flush=True)
        smallest, largest = min(medians), max(medians)
        summary[path] = {"median_commit_s_by_table_rows": medians,
                         "largest_over_smallest": round(medians[largest] / medians[smallest], 2)}
    stop_spark()
    shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({**summary, "exact": all(exact_by_run.values())}))


if __name__ == "__main__":
    main()
