"""Sustained: does throughput hold while the tables grow, with the daemon's table maintenance on?

One backlog run of ``--rows`` row changes (60% inserts, 30% updates, 10%
deletes; the tables grow by half the changes) from the dev server into 3
fresh ten-column Iceberg tables, Spark local[2], with maintenance every
``--maintenance-minutes`` per table (expiring every snapshot older than the
one that holds the position: ``keep_snapshots_hours`` 0). Prints the rows/s
of each tenth of the committed rows, the last tenth against the first, each
maintenance run, and the tables' live files at the end.

    .venv/bin/python -m bench.sustained --rows 10000000 --canal-store 262144 --min-mb 128 --max-mb 256
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import tempfile

from bench.common import (
    add_commit_arguments,
    bench_tables,
    commit_settings,
    drain_into_iceberg,
    local_spark_settings,
    workload_file,
)
from canalbridge.daemon.logs import configure_logging
from canalbridge.sync.settings import MaintenanceSettings
from spark_sink.maintainer import live_files
from spark_sink.session import get_spark, stop_spark
from spark_sink.table import TargetTable


def tenths(samples: list[tuple[float, int]], total: int) -> list[float]:
    """Rows/s over each tenth of ``total`` committed rows, from (seconds, rows committed) samples."""
    times = [0.0]
    for tenth in range(1, 11):
        goal = total * tenth / 10
        times.append(next(seconds for seconds, rows in samples if rows >= goal))
    return [round(total / 10 / max(end - start, 1e-9)) for start, end in itertools.pairwise(times)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rows-per-event", type=int, default=10)
    parser.add_argument("--canal-store", type=int, default=65536,
                        help="Canal's canal.instance.memory.buffer.size, entries (a power of two)")
    parser.add_argument("--maintenance-minutes", type=float, default=2.0, help="per table")
    add_commit_arguments(parser)
    args = parser.parse_args()
    configure_logging("warning")

    tables = bench_tables(3)
    path, rows, last = workload_file("e2e", tables, args.rows, rows_per_event=args.rows_per_event)
    spark_settings = local_spark_settings(tempfile.mkdtemp(prefix="canalbridge-bench-sustained-"), args.decoder,
                                          args.upsert_deletes)
    commit = commit_settings(args, store_capacity=args.canal_store, store_batch_mode="ITEMSIZE")
    maintenance = MaintenanceSettings(interval_minutes=args.maintenance_minutes, keep_snapshots_hours=0)
    samples: list[tuple[float, int]] = []
    drained = drain_into_iceberg("sustained", path, last, tables, spark_settings, commit, maintenance=maintenance,
                                 samples=samples, timeout_s=4 * 3600)
    elapsed, recorders = drained.elapsed_s, drained.recorders
    committed = sum(drained.lags.values())
    by_tenth = tenths([*samples, (elapsed, committed)], committed)
    runs = [{"table": target, "seconds": round(seconds, 1), **dataclasses.asdict(report)}
            for target, recorder in recorders.items() for seconds, report in recorder.maintenance]
    for run in runs:
        print(json.dumps({"maintenance": run}), flush=True)
    spark = get_spark(spark_settings)
    final = {}
    for target in recorders:
        files = live_files(TargetTable(spark, target))
        final[target] = {"rows": spark.table(target).count(), "data_files": files.data, "delete_files": files.deletes}
    stop_spark()
    print(json.dumps({
        "benchmark": "sustained", "rows": rows, "seconds": round(elapsed, 1), "rows_per_s": round(rows / elapsed),
        "commits": drained.job.stats.commits, "rows_committed": committed, "rows_per_s_by_tenth": by_tenth,
        "last_tenth_over_first": round(by_tenth[-1] / by_tenth[0], 2),
        "maintenance_runs": len(runs), "maintenance_seconds": round(sum(r["seconds"] for r in runs), 1),
        "tables": final, "peak_python_rss_mb": round(drained.peak_rss_mb),
        "python_cpu_us_per_row": round(drained.cpu_s / rows * 1e6, 2),
        "jvm_cpu_us_per_row": round(drained.jvm_cpu_s / rows * 1e6, 2),
        "devserver_cpu_us_per_row": round(drained.source_cpu_s / rows * 1e6, 2),
        "canal_store": args.canal_store, "min_mb": args.min_mb, "max_mb": args.max_mb,
        "maintenance_minutes": args.maintenance_minutes}), flush=True)


if __name__ == "__main__":
    main()
