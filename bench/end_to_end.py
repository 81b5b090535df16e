"""End to end: row changes/s from the dev server into 3 Iceberg tables (Spark local[2]), and the lag.

The workload (3 ten-column tables, 60% inserts / 30% updates / 10% deletes)
is generated once and cached. Two runs, each into fresh tables:

1. backlog: the whole workload is waiting in Canal; the figure is row
   changes/s from job start until the last entry is acked;
2. live: the dev server releases the workload at ``--rate`` row changes/s
   (default: 80% of the backlog figure) and stamps each entry with the time
   it was released, as MySQL stamps the time a transaction ran; the figure
   is the lag from that time to the commit that made the row visible, at
   p50 and p99, over every row.

Canal's store holds ``--canal-store`` entries (65536: a tuned
``canal.instance.memory.buffer.size``; the un-acked entries it holds bound
the size of a commit); commits every ``--interval`` seconds (10), or when Doris's
minimums (``--min-events`` 10,000 and ``--min-mb`` 15, both) are reached, or
at ``--max-mb`` (64). Prints one JSON line per run, then a summary line.

With ``--cluster``, the backlog run goes once more, on a two-worker Spark
standalone cluster into S3 through a JDBC catalog, and the summary says
what the cluster adds to each commit (:mod:`bench.cluster`). With ``--cuts SECONDS``, it goes twice more
on the warm JVM, without cuts and then publishing a consistent cut at most every SECONDS (every commit when
below the commit's time), and the summary says what the cuts cost: the rows/s against the warm run without,
each table's commit, and the seconds of each publish. With ``--atomic``, it goes twice more into a Nessie
catalog, each table committing on its own and then every commit published in one catalog commit
(:mod:`bench.atomic`).

    .venv/bin/python -m bench.end_to_end --rows 2000000
    .venv/bin/python -m bench.end_to_end --rows 500000 --cluster
    .venv/bin/python -m bench.end_to_end --rows 500000 --cuts 10
    .venv/bin/python -m bench.end_to_end --rows 500000 --atomic
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench import atomic, cluster
from bench.common import (
    add_commit_arguments,
    bench_tables,
    commit_settings,
    drain_into_iceberg,
    local_spark_settings,
    run_result,
    workload_file,
)
from canalbridge.daemon.logs import configure_logging
from canalbridge.sync.channel.sink import CatalogPublisher
from canalbridge.sync.model.position import Position
from canalbridge.sync.settings import CommitSettings, CutSettings
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings


def run(name: str, path: Path, last: Position, rows: int, spark_settings: SparkSettings,
        commit: CommitSettings, rate: float = 0, cuts: CutSettings | None = None, catalog: str | None = None,
        publisher: CatalogPublisher | None = None) -> dict:
    """One job over the whole file into fresh tables ``CATALOG.NAME.*`` (``catalog``, or the settings'); its
    throughput, lag, memory, the seconds of its tables' commits (each table's apply), with ``cuts`` those of
    each cut published, and with ``publisher`` (atomic commits) those of each catalog commit."""
    tables = bench_tables(3)
    catalog = catalog or spark_settings.catalog
    drained = drain_into_iceberg(name, path, last, tables, spark_settings, commit, rate=rate, cuts=cuts,
                                 catalog=catalog, publisher=publisher)
    result = run_result(name, rows, drained.elapsed_s, drained.job, drained.lags, drained.peak_rss_mb, rate,
                        cpu_s=drained.cpu_s, jvm_cpu_s=drained.jvm_cpu_s, source_cpu_s=drained.source_cpu_s)
    applies = sorted(seconds for recorder in drained.recorders.values() for seconds in recorder.applies)
    result["table_commits"] = len(applies)
    result["table_commit_s_p50"] = round(applies[len(applies) // 2], 2) if applies else None
    result["table_commit_s_mean"] = round(sum(applies) / len(applies), 2) if applies else None
    if cuts is not None:
        publishes = sorted(drained.cut_publishes)
        result["cuts_published"] = len(publishes)
        result["cut_publish_s_p50"] = round(publishes[len(publishes) // 2], 2) if publishes else None
        result["cut_publish_s_max"] = round(publishes[-1], 2) if publishes else None
    if publisher is not None:
        publishes = sorted(drained.catalog_publishes)
        result["catalog_publishes"] = len(publishes)
        result["catalog_publish_s_p50"] = round(publishes[len(publishes) // 2], 3) if publishes else None
        result["catalog_publish_s_max"] = round(publishes[-1], 3) if publishes else None
    spark = get_spark(spark_settings)
    result["table_rows"] = {t.name: spark.table(f"{catalog}.{name}.{t.name}").count() for t in tables}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rows-per-event", type=int, default=10)
    parser.add_argument("--canal-store", type=int, default=65536,
                        help="Canal's canal.instance.memory.buffer.size, entries (a power of two)")
    parser.add_argument("--cuts", type=float, default=0.0, metavar="SECONDS",
                        help="the backlog run twice more, warm: without cuts, then publishing a consistent cut at "
                             "most every SECONDS (0: not)")
    parser.add_argument("--atomic", action="store_true",
                        help="the backlog run twice more, warm, into a Nessie catalog: each table committing on its "
                             "own, then every commit published in one catalog commit ([job.cuts] atomic)")
    parser.add_argument("--cluster", action="store_true",
                        help="the backlog run once more, on a Spark standalone cluster into S3 through a JDBC catalog")
    add_commit_arguments(parser)
    args = parser.parse_args()
    configure_logging("warning")

    path, rows, last = workload_file("e2e", bench_tables(3), args.rows, rows_per_event=args.rows_per_event)
    commit = commit_settings(args, store_capacity=args.canal_store, store_batch_mode="ITEMSIZE")  # the dev server's
    root = tempfile.mkdtemp(prefix="canalbridge-bench-e2e-")
    spark_settings = local_spark_settings(root, args.decoder, args.upsert_deletes)
    backlog = run("backlog", path, last, rows, spark_settings, commit)
    print(json.dumps(backlog), flush=True)
    rate = args.rate or 0.8 * backlog["rows_per_s"]
    live = run("live", path, last, rows, spark_settings, commit, rate=rate)
    print(json.dumps(live), flush=True)
    with_cuts: dict = {}
    if args.cuts:  # two more backlog runs, both on a warm JVM: without cuts, then with them
        warm = run("backlog_warm", path, last, rows, spark_settings, commit)
        print(json.dumps(warm), flush=True)
        cut_run = run("backlog_cuts", path, last, rows, spark_settings, commit,
                      cuts=CutSettings(interval_seconds=args.cuts))
        print(json.dumps(cut_run), flush=True)
        with_cuts = {"cut_interval_s": args.cuts, "warm_rows_per_s": warm["rows_per_s"],
                     "cuts_rows_per_s": cut_run["rows_per_s"],
                     "cuts_share_of_warm": round(cut_run["rows_per_s"] / warm["rows_per_s"], 3),
                     "cuts_published": cut_run["cuts_published"], "cut_publish_s_p50": cut_run["cut_publish_s_p50"],
                     "cut_publish_s_max": cut_run["cut_publish_s_max"],
                     "warm_table_commit_s_p50": warm["table_commit_s_p50"],
                     "cuts_table_commit_s_p50": cut_run["table_commit_s_p50"]}
    in_nessie = atomic.compare(
        lambda name, catalog, publisher: run(name, path, last, rows, spark_settings, commit, catalog=catalog,
                                             publisher=publisher),
        spark_settings, commit.commit_timeout_seconds) if args.atomic else {}
    stop_spark()
    on_cluster = cluster.compare(backlog, Path(root) / "warehouse" / "backlog", path, rows, last, commit,
                                 args.decoder) if args.cluster else {}
    print(json.dumps({"benchmark": "end_to_end", "rows": rows, "tables": 3, "decoder": args.decoder,
                      "overlap": not args.no_overlap, "commit_interval_s": args.interval,
                      "canal_store": args.canal_store, "min_events": args.min_events, "min_mb": args.min_mb,
                      "max_mb": args.max_mb,
                      "backlog_rows_per_s": backlog["rows_per_s"], "live_rate": round(rate),
                      "live_rows_per_s": live["rows_per_s"], "lag_p50_s": live["lag_p50_s"],
                      "lag_p99_s": live["lag_p99_s"],
                      "lag_p99_in_intervals": round(live["lag_p99_s"] / args.interval, 2),
                      "backlog_python_cpu_us_per_row": backlog["python_cpu_us_per_row"],
                      "backlog_jvm_cpu_us_per_row": backlog["jvm_cpu_us_per_row"],
                      "backlog_devserver_cpu_us_per_row": backlog["devserver_cpu_us_per_row"], **with_cuts,
                      **in_nessie, **on_cluster}))


if __name__ == "__main__":
    main()
