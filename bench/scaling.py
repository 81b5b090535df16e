"""Scaling: commit time against the number of tables, and memory with a 10M-row backlog waiting in Canal.

Tables: one transaction of ``--total-rows`` (100,000) upserts spread evenly
over 1, 10 and 50 ten-column Iceberg tables, staged through one writer per
table and committed concurrently, as the channels of a job commit. The
first table count also pays for JVM warm-up, so a warm-up round runs first.
(For commit time against rows per commit, see bench/commit_latency.py.)

Memory: the dev server replays a 1M-row file ``--repeat`` times (10: a
10M-row backlog) into one Iceberg table with the default commit settings and
Canal's default store (16384 entries). Every 2 s it samples this process's
RSS and the JVM's used heap; the figures must stay flat while the backlog
shrinks, because what is held is bounded by the store and the commit
settings. Runs for ``--memory-seconds`` (240).

    .venv/bin/python -m bench.scaling
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench.common import bench_tables, dev_server, local_spark_settings, make_rows, rss_mb, workload_file
from canalbridge.daemon.logs import configure_logging
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.changes import RowBatch, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings
from spark_sink.sink import make_sink, make_writer

SEND_ROWS = 5000


def commit_across_tables(spark, settings: SparkSettings, count: int, total_rows: int, namespace: str) -> dict:
    tables = bench_tables(count)
    writers = [make_writer(spark, ChannelSettings(t.qualified, f"lake.{namespace}.{t.name}"), "bench", settings)
               for t in tables]
    per_table = total_rows // count
    position = EntryPosition("mysql-bin.000001", 4)
    columns = tuple(SourceColumn(c.name, c.mysql_type.declared, 0, c.is_key) for c in tables[0].columns)
    names = tuple(c.name for c in tables[0].columns)
    started = time.perf_counter()
    for table, writer in zip(tables, writers):
        rows = make_rows(0, per_table, position.offset)
        writer.begin()
        for index in range(0, per_table, SEND_ROWS):
            writer.send(RowBatch(table.qualified, names, columns, (0,), tuple(rows[index:index + SEND_ROWS])))
    staged = time.perf_counter() - started
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=count) as pool:  # channels commit concurrently
        list(pool.map(lambda writer: writer.commit(position, "bench"), writers))
    commit_s = time.perf_counter() - started
    return {"tables": count, "rows": per_table * count, "rows_per_table": per_table, "stage_s": round(staged, 2),
            "commit_s": round(commit_s, 2), "commit_s_per_table": round(commit_s / count, 3)}


def jvm_heap_mb(spark) -> float:
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    return (runtime.totalMemory() - runtime.freeMemory()) / (1 << 20)


def memory_with_backlog(spark, settings: SparkSettings, file_rows: int, repeat: int, seconds: float) -> dict:
    path, _, _ = workload_file("decode", bench_tables(1), file_rows, rows_per_event=10)
    table = bench_tables(1)[0]
    samples: list[tuple[float, float, float, int]] = []
    with dev_server(path, repeat=repeat, capacity=16384) as source:
        canal = CanalSettings("127.0.0.1", source.port, "bench", batch_size=4096, poll_timeout_ms=100)
        job_settings = JobSettings("memory", canal, (ChannelSettings(table.qualified, "lake.memory.events_1"),),
                                   CommitSettings())
        job = SyncJob(job_settings, lambda channel: make_sink(spark, channel, "memory", settings))
        started = time.perf_counter()
        job.start()
        tick = threading.Event()
        while time.perf_counter() - started < seconds:
            tick.wait(2.0)  # the sampling period
            if job.fail_message is not None:
                raise SystemExit(f"memory run failed: {job.fail_message}")
            samples.append((time.perf_counter() - started, rss_mb(), jvm_heap_mb(spark),
                            job.channels[0].rows_written))
        job.pause()
    half = len(samples) // 2
    first, second = samples[:half], samples[half:]
    written = samples[-1][3]
    return {"backlog_rows": repeat * file_rows, "seconds": round(samples[-1][0]), "rows_committed": written,
            "rows_per_s": round(written / samples[-1][0]),
            "python_rss_mb_max_first_half": round(max(s[1] for s in first)),
            "python_rss_mb_max_second_half": round(max(s[1] for s in second)),
            "jvm_heap_mb_max_first_half": round(max(s[2] for s in first)),
            "jvm_heap_mb_max_second_half": round(max(s[2] for s in second)),
            "commits": job.stats.commits}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="1,10,50")
    parser.add_argument("--total-rows", type=int, default=100_000)
    parser.add_argument("--memory-rows", type=int, default=1_000_000, help="rows in the file replayed")
    parser.add_argument("--repeat", type=int, default=10, help="backlog = MEMORY_ROWS x REPEAT")
    parser.add_argument("--memory-seconds", type=float, default=240)
    args = parser.parse_args()
    configure_logging("warning")
    root = tempfile.mkdtemp(prefix="canalbridge-bench-scaling-")
    settings = local_spark_settings(root)
    spark = get_spark(settings)
    commit_across_tables(spark, settings, 1, 10_000, "warmup")
    by_tables = {}
    for count in (int(c) for c in args.tables.split(",")):
        result = commit_across_tables(spark, settings, count, args.total_rows, f"t{count}")
        by_tables[count] = result["commit_s"]
        print(json.dumps(result), flush=True)
    memory = memory_with_backlog(spark, settings, args.memory_rows, args.repeat, args.memory_seconds)
    print(json.dumps(memory), flush=True)
    stop_spark()
    print(json.dumps({"benchmark": "scaling", "commit_s_by_tables": by_tables, "memory": memory}))


if __name__ == "__main__":
    main()
