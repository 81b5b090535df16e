"""Real stack: row changes/s from SQL into MariaDB, through a real Canal server, into 3 Iceberg tables, and the lag.

A private MariaDB and the real Canal server (``make real-stack``) on this
machine; the workload of :mod:`bench.sql_workload` (60% inserts, 30%
updates, 10% deletes into three 10-column tables, written by a process of
its own). Two runs, each with its own database, Canal server and fresh
Iceberg tables:

1. backlog: the whole workload is in the binlog before the job starts; the
   figure is row changes/s from job start until the last transaction is acked;
2. live: the job is running and the workload is written at ``--rate`` row
   changes/s (default: 80% of the backlog figure); the figure is the lag
   from each row's binlog timestamp to the commit that made it visible, at
   p50 and p99 over every row. MariaDB stamps events in whole seconds, so
   the lag reads up to 1 s high.

Then, unless ``--no-dev-server``, the dev-server backlog run of
``bench.end_to_end`` with as many row changes and the same commit settings,
for the figure beside it. Each run checks every target against its MariaDB
table (rows and two column sums). Prints one JSON line per run, then a
summary line.

Canal runs with its stock ``MEMSIZE`` batch mode and a store of
``--canal-store`` KB (``canal.instance.memory.buffer.size``, default 65536:
64 MB, a tuned value, as the dev-server benchmark's 65536-entry store).

    .venv/bin/python -m bench.real_stack --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import sql_workload
from bench.common import (
    LagRecorder,
    add_commit_arguments,
    bench_tables,
    commit_settings,
    drain,
    local_spark_settings,
    rss_mb,
    run_result,
    workload_file,
)
from bench.end_to_end import run as run_dev_server
from canalbridge.daemon.logs import configure_logging
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings
from spark_sink.sink import make_sink
from tests.infra.canal_server import CanalDestination, CanalServer
from tests.infra.mariadb import MariaDBServer

TABLES = ("events_1", "events_2", "events_3")
DRAIN_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Stack:
    """What the runs share: the MariaDB, Spark's settings, the commit settings and the options."""

    root: Path
    mariadb: MariaDBServer
    spark: SparkSettings
    commit: CommitSettings
    args: argparse.Namespace


def run(stack: Stack, name: str, rounds: int, rate: float = 0) -> dict[str, Any]:
    """One run into fresh tables ``lake.real_NAME.*``: its throughput, lag, memory and verdict."""
    database = f"real_{name}"
    stack.mariadb.create_database(database)
    stack.mariadb.execute(*(sql_workload.create_table_sql(database, table) for table in TABLES), database=database)
    connect = stack.mariadb.connect_arguments(database)
    spark = get_spark(stack.spark)
    lags: Counter = Counter()
    lock = threading.Lock()
    destination = CanalDestination(database, filter_regex=rf"{database}\..*")
    print(f"{name}: starting Canal (destination {database})", flush=True)
    with CanalServer(stack.root / name / "canal", stack.mariadb, [destination], password=os.urandom(8).hex(),
                     heap_min="512m", heap_max="1g",
                     server_properties={"canal.instance.memory.buffer.size": str(stack.commit.store_capacity)}
                     ) as canal:
        canal_settings = canal.canal_settings(database, batch_size=stack.args.batch_size, poll_timeout_ms=100)
        channels = tuple(ChannelSettings(f"{database}.{table}", f"lake.{database}.{table}") for table in TABLES)
        job = SyncJob(JobSettings(name, canal_settings, channels, stack.commit), lambda channel: LagRecorder(
            make_sink(spark, channel, name, stack.spark), lags, lock).sink)
        if rate:  # live: written while the job runs
            started, cpu_started = time.perf_counter(), time.process_time()
            job.start()
            samples = [0.0]
            written = _finish_writer(*_start_writer(connect, rounds, rate, name),
                                     tick=lambda: samples.append(_alive(job, name)))
            last = EntryPosition(*stack.mariadb.last_event_start("Xid", since=written["last_commit_from"]))
            peak_rss = max(max(samples), drain(job, name, last, lags, started, DRAIN_TIMEOUT_S))
        else:  # backlog: all of it in the binlog first
            written = _finish_writer(*_start_writer(connect, rounds, rate, name), tick=lambda: None)
            last = EntryPosition(*stack.mariadb.last_event_start("Xid", since=written["last_commit_from"]))
            started, cpu_started = time.perf_counter(), time.process_time()
            job.start()
            peak_rss = drain(job, name, last, lags, started, DRAIN_TIMEOUT_S)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        job.pause()
    verdict = {table: (sql_workload.table_summary(connect, table),
                       sql_workload.target_summary(spark, f"lake.{database}.{table}"))
               for table in TABLES}
    result = run_result(name, written["row_changes"], elapsed, job, lags, peak_rss, rate, cpu_s=cpu)
    result.update({"source": "mariadb+canal", "sql_seconds": written["seconds"],
                   "table_rows": {t: v[1]["rows"] for t, v in verdict.items()},
                   "targets_match_mariadb": all(source == target for source, target in verdict.values())})
    return result


def _start_writer(connect: dict[str, Any], rounds: int, rate: float, name: str) -> tuple[Any, Any]:
    context = multiprocessing.get_context("spawn")  # never fork a process that runs a JVM bridge
    results = context.Queue()
    process = context.Process(target=sql_workload.write, args=(connect, TABLES, rounds),
                              kwargs={"rate": rate, "label": name, "report": results.put}, name="sql-workload")
    process.start()
    return process, results


def _finish_writer(process: Any, results: Any, tick: Callable[[], None]) -> dict[str, Any]:
    """The SQL workload's result; ``tick`` runs every half second meanwhile. A failed workload ends the run."""
    try:
        while True:
            try:
                result = results.get(timeout=0.5)
                break
            except queue.Empty:
                tick()
                if not process.is_alive():
                    raise SystemExit(f"the SQL workload failed (exit code {process.exitcode})") from None
        process.join(timeout=60)
        return dict(result)
    finally:
        if process.is_alive():
            process.terminate()
            process.join(timeout=60)


def _alive(job: SyncJob, name: str) -> float:
    """This process's RSS (MB), after checking that the job still runs."""
    if job.fail_message is not None:
        raise SystemExit(f"{name}: the job stopped: {job.state} {job.fail_message}")
    return rss_mb()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="row changes per run (rounded to 100)")
    parser.add_argument("--canal-store", type=int, default=65536,
                        help="Canal's canal.instance.memory.buffer.size, KB in MEMSIZE mode")
    parser.add_argument("--batch-size", type=int, default=4096, help="a get's size, KB in MEMSIZE mode")
    add_commit_arguments(parser)
    parser.add_argument("--no-dev-server", action="store_true", help="skip the dev-server run beside it")
    parser.add_argument("--workdir", type=Path, help="for MariaDB, Canal, the warehouse (default: a temp dir)")
    args = parser.parse_args()
    configure_logging("warning")

    rounds = max(1, args.rows // sql_workload.ROUND_ROW_CHANGES)
    root = (args.workdir or Path(tempfile.mkdtemp(prefix="canalbridge-bench-real-"))).resolve()
    spark_settings = local_spark_settings(root, args.decoder, args.upsert_deletes)
    commit = commit_settings(args, store_capacity=args.canal_store, store_batch_mode="MEMSIZE")
    print(f"starting MariaDB in {root}", flush=True)
    with MariaDBServer(root / "mariadb") as mariadb:
        stack = Stack(root, mariadb, spark_settings, commit, args)
        backlog = run(stack, "backlog", rounds)
        print(json.dumps(backlog), flush=True)
        rate = args.rate or 0.8 * backlog["rows_per_s"]
        live = run(stack, "live", rounds, rate=rate)
        print(json.dumps(live), flush=True)
    summary: dict[str, Any] = {
        "benchmark": "real_stack", "rows": backlog["rows"], "tables": len(TABLES), "commit_interval_s": args.interval,
        "canal_store_kb": args.canal_store, "canal_batch_mode": "MEMSIZE", "min_events": args.min_events,
        "min_mb": args.min_mb, "max_mb": args.max_mb,
        "backlog_rows_per_s": backlog["rows_per_s"], "live_rate": round(rate), "live_rows_per_s": live["rows_per_s"],
        "lag_p50_s": live["lag_p50_s"], "lag_p99_s": live["lag_p99_s"],
        "lag_p99_in_intervals": round(live["lag_p99_s"] / args.interval, 2),
        "targets_match_mariadb": backlog["targets_match_mariadb"] and live["targets_match_mariadb"]}
    if not args.no_dev_server:
        print("dev server: the same number of row changes from the generator's workload", flush=True)
        path, rows, last = workload_file("e2e", bench_tables(3), backlog["rows"], rows_per_event=10)
        dev = run_dev_server("devserver", path, last, rows, spark_settings,
                             replace(commit, store_batch_mode="ITEMSIZE"))
        print(json.dumps(dev), flush=True)
        summary["dev_server_backlog_rows_per_s"] = dev["rows_per_s"]
    stop_spark()
    print(json.dumps(summary), flush=True)
    if not summary["targets_match_mariadb"]:
        raise SystemExit("a target differs from its MariaDB table")


if __name__ == "__main__":
    main()
