"""Decode: rows/s through Receiver + Consumer + Channels into the in-memory writer, with two references.

One workload (a 10-column table, 60% inserts / 30% updates / 10% deletes)
is generated once and cached as an entries file; a dev server in another
process serves it to each contender in turn:

- canalbridge: a SyncJob (Receiver, Consumer, Channel threads) into an
  InMemoryWriter, from job start until the last entry is acked (median of
  ``--runs``, each with a fresh job and dev server);
- canalbridge staging: the same job on the JVM decoder's path, the daemon's
  own: each channel stages its entries' RowChange bytes, and the writer
  counts the staged changes it is sent instead of decoding them (Spark's
  part). Its figure is the daemon's Python CPU per entry, every thread of
  this process (the dev server runs in another), from start to the last ack;
- canal-python 0.4: get + ack, parse every entry and row, read every value
  (bench/canal_python_reference.py, in its own process);
- protobuf ceiling: parse Entry and RowChange and read every value straight
  from the file, one thread, no network.

and the two halves of the path that hands Spark the bytes (issue 13, item 1):

- python routing: what the daemon's thread still does per entry on that
  path: parse the Entry, read its header (table, position, event type), and
  stage the RowChange bytes with the position; one thread, from the file;
- jvm decode: Spark ``local[2]`` decoding the staged bytes into change rows
  with the JVM decoder (``spark_sink.decode``), every value extracted; the
  staged rows are cached in Spark first, so the figure is the decode alone:
  the second of two passes (the first is printed too: the JVM is still
  compiling the decoder then). Its CPU is the Spark JVM's, per row, over
  both cores.

Prints one JSON line per contender, then a summary line.

    .venv/bin/python -m bench.decode --rows 1000000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import bench_tables, dev_server, workload_file
from canalbridge.daemon.logs import configure_logging
from canalbridge.devkit.entry_file import read_entries, read_raw_entries
from canalbridge.devkit.feeds import rows_in
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.changes import BeforeImages, RawBatch
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from tests.infra.memory_writer import InMemoryWriter
from tests.infra.replay import apply_entries

HERE = Path(__file__).resolve().parent
TABLE = bench_tables(1)[0]
ROWDATA = entry_pb.EntryType.ROWDATA
CAPACITY = 65536


def protobuf_ceiling(path: Path) -> dict:
    """Parse every Entry and RowChange and read every value, straight from the file's bytes."""
    raw_entries = list(read_raw_entries(path))
    rows = values = 0
    started = time.perf_counter()
    for raw in raw_entries:
        entry = entry_pb.Entry.FromString(raw)
        if entry.entryType != ROWDATA:
            continue
        change = entry_pb.RowChange.FromString(entry.storeValue)
        for row_data in change.rowDatas:
            rows += 1
            before = [None if c.isNull else c.value for c in row_data.beforeColumns]
            after = [None if c.isNull else c.value for c in row_data.afterColumns]
            values += len(before) + len(after)
    elapsed = time.perf_counter() - started
    return {"contender": "protobuf_ceiling", "rows": rows, "values": values, "seconds": round(elapsed, 3),
            "rows_per_s": round(rows / elapsed)}


def python_routing(path: Path) -> tuple[dict, list[tuple]]:
    """Header-only routing: parse each Entry, read its header, stage its RowChange bytes (one thread)."""
    raw_entries = list(read_raw_entries(path))
    staged: dict[str, list[tuple]] = {}
    rows = 0
    cpu, started = time.process_time(), time.perf_counter()
    for raw in raw_entries:
        entry = entry_pb.Entry.FromString(raw)
        if entry.entryType != ROWDATA:
            continue
        header = entry.header
        table = f"{header.schemaName}.{header.tableName}"
        rows_here = staged.setdefault(table, [])
        rows_here.append((len(rows_here), header.logfileName, header.logfileOffset, header.executeTime,
                          entry.storeValue))
        rows += rows_in(entry)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    result = {"contender": "python_routing", "rows": rows, "seconds": round(elapsed, 3),
              "rows_per_s": round(rows / elapsed), "cpu_us_per_row": round(cpu / rows * 1e6, 2)}
    return result, staged[TABLE.qualified]


def jvm_decode(staged: list[tuple], rows: int, workdir: Path) -> dict:
    """Spark local[2] decoding the staged bytes with the JVM decoder, every value extracted."""
    from pyspark import StorageLevel

    from bench.common import cpu_seconds, local_spark_settings, spark_pid
    from spark_sink.decode import RAW_FIELDS, decoded_changes, register
    from spark_sink.session import get_spark, stop_spark
    from spark_sink.staging import Staging

    # The staged entries are cached in the driver's heap: 4 GB holds 1M of them with room to spare.
    settings = dataclasses.replace(local_spark_settings(workdir), conf={"spark.driver.memory": "4g"})
    spark = get_spark(settings)
    try:
        register(spark)
        staging = Staging(RAW_FIELDS, len(staged) + 1, workdir / "staged")  # the channels' staging
        staging.add(staged)
        raw = staging.to_dataframe(spark).persist(StorageLevel.MEMORY_ONLY)
        raw.count()
        mapper = RowMapper(TABLE.qualified, None, before_images=BeforeImages.KEY_CHANGES)
        mapper.map(entry_pb.RowChange.FromString(staged[0][4]), EntryPosition("", 0))
        frame = decoded_changes(raw, mapper.columns or (), mapper.key_indexes)
        jvm = spark_pid(spark)
        passes = []  # the first pass runs while the JVM still compiles the decoder: both are reported
        for _ in range(2):
            cpu, started = cpu_seconds(jvm), time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            passes.append((time.perf_counter() - started, cpu_seconds(jvm) - cpu))
        changes = frame.count()
    finally:
        stop_spark()
    (cold, _), (elapsed, cpu) = passes
    return {"contender": "jvm_decode", "rows": rows, "changes": changes, "seconds": round(elapsed, 3),
            "rows_per_s": round(rows / elapsed), "first_pass_rows_per_s": round(rows / cold),
            "jvm_cpu_us_per_row": round(cpu / rows * 1e6, 2)}


def drain(path: Path, last: EntryPosition, batch_size: int, writer: InMemoryWriter) -> tuple[float, float, SyncJob]:
    """One fresh job into ``writer`` draining the file through a dev server until ``last`` is acked: the seconds
    it took, this process's CPU seconds meanwhile (the dev server runs in another), and the paused job."""
    with dev_server(path, capacity=CAPACITY) as source:
        canal = CanalSettings("127.0.0.1", source.port, "bench", batch_size=batch_size, poll_timeout_ms=100)
        settings = JobSettings("bench", canal, (ChannelSettings(TABLE.qualified, "lake.bench.events_1"),),
                               # A 1 s interval: the in-memory commit is instant, so the clock is not left waiting.
                               CommitSettings(interval_seconds=1, min_bytes=1 << 20, store_capacity=CAPACITY))
        job = SyncJob(settings, lambda channel: ChannelSink.of(writer))
        cpu, started = time.process_time(), time.perf_counter()
        job.start()
        while job.acks.position is None or job.acks.position < last:
            time.sleep(0.05)  # a benchmark's progress poll
            if job.fail_message is not None or time.perf_counter() - started > 1800:
                raise SystemExit(f"not drained: {job.state} {job.fail_message}")
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        job.pause()
    return elapsed, cpu, job


def canalbridge_core(path: Path, last: EntryPosition, rows: int, batch_size: int, expected: dict) -> dict:
    """One fresh job draining the file; ``expected``: the table the reference consumer builds from it."""
    writer = InMemoryWriter(TABLE.qualified)
    elapsed, _, job = drain(path, last, batch_size, writer)
    return {"contender": "canalbridge", "rows": rows, "seconds": round(elapsed, 3),
            "rows_per_s": round(rows / elapsed), "commits": job.stats.commits,
            "exact": writer.rows == expected}


class StagedCounter(InMemoryWriter):
    """A writer on the JVM decoder's path that counts the staged changes each commit sends, and decodes none."""

    def __init__(self, table: str) -> None:
        super().__init__(table, decode_raw=True)
        self.staged = 0

    def send_raw(self, batch: RawBatch) -> None:
        with self._lock:
            self.staged += len(batch.changes)


def canalbridge_staging(path: Path, last: EntryPosition, rows: int, entries: int, batch_size: int) -> dict:
    """One fresh job staging the file's entries as the daemon does for the JVM decoder; its Python CPU per entry."""
    writer = StagedCounter(TABLE.qualified)
    elapsed, cpu, _ = drain(path, last, batch_size, writer)
    return {"contender": "canalbridge_staging", "rows": rows, "entries": entries, "staged": writer.staged,
            "seconds": round(elapsed, 3), "rows_per_s": round(rows / elapsed),
            "python_cpu_us_per_entry": round(cpu / entries * 1e6, 2)}


def canal_python(path: Path, rows: int, batch_size: int) -> dict:
    with dev_server(path, capacity=CAPACITY) as source:
        env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
        result = subprocess.run(
            [sys.executable, str(HERE / "canal_python_reference.py"), str(source.port), "bench", str(rows),
             str(batch_size)],
            capture_output=True, text=True, env=env, timeout=3600, check=True,
        )
    return {"contender": "canal-python 0.4 (pure-Python protobuf)", **json.loads(result.stdout.splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rows-per-event", type=int, default=10, help="rows per binlog rows event")
    parser.add_argument("--batch-size", type=int, default=8192, help="entries per Canal get")
    parser.add_argument("--runs", type=int, default=3, help="canalbridge runs; the median is reported")
    parser.add_argument("--skip-canal-python", action="store_true")
    parser.add_argument("--skip-jvm", action="store_true", help="no Spark: leave out the JVM decode")
    args = parser.parse_args()
    configure_logging("warning")

    path, rows, last = workload_file("decode", (TABLE,), args.rows, rows_per_event=args.rows_per_event)
    tables: dict = {}
    apply_entries(tables, read_entries(path))
    # Ours first, each run in a fresh job; the figure is the median run (runs vary by about 20% here).
    runs = []
    for _ in range(args.runs):
        runs.append(canalbridge_core(path, last, rows, args.batch_size, tables[TABLE.qualified]))
        print(json.dumps(runs[-1]), flush=True)
    ours = sorted(runs, key=lambda r: r["rows_per_s"])[len(runs) // 2]
    entries = sum(1 for _ in read_raw_entries(path))
    staging_runs = []
    for _ in range(args.runs):
        staging_runs.append(canalbridge_staging(path, last, rows, entries, args.batch_size))
        print(json.dumps(staging_runs[-1]), flush=True)
    staging = sorted(staging_runs, key=lambda r: r["python_cpu_us_per_entry"])[len(staging_runs) // 2]
    results = [ours, staging, protobuf_ceiling(path)]
    print(json.dumps(results[-1]), flush=True)
    if not args.skip_canal_python:
        results.append(canal_python(path, rows, args.batch_size))
        print(json.dumps(results[-1]), flush=True)
    routing, staged = python_routing(path)
    results.append(routing)
    print(json.dumps(routing), flush=True)
    if not args.skip_jvm:
        with tempfile.TemporaryDirectory(prefix="canalbridge-bench-decode-") as workdir:
            results.append(jvm_decode(staged, rows, Path(workdir)))
        print(json.dumps(results[-1]), flush=True)
    by_name = {r["contender"].split()[0]: r["rows_per_s"] for r in results}
    summary = {"benchmark": "decode", "rows": rows, "rows_per_event": args.rows_per_event,
               "rows_per_s": by_name, "canalbridge_runs": [r["rows_per_s"] for r in runs],
               "exact": all(r["exact"] for r in runs),
               "canalbridge_vs_ceiling": round(by_name["canalbridge"] / by_name["protobuf_ceiling"], 3)}
    summary["python_routing_cpu_us_per_row"] = routing["cpu_us_per_row"]
    summary["staging_python_cpu_us_per_entry"] = staging["python_cpu_us_per_entry"]
    summary["staging_runs_python_cpu_us_per_entry"] = [r["python_cpu_us_per_entry"] for r in staging_runs]
    if "jvm_decode" in by_name:
        summary["jvm_decode_cpu_us_per_row"] = results[-1]["jvm_cpu_us_per_row"]
    if "canal-python" in by_name:
        summary["canalbridge_vs_canal_python"] = round(by_name["canalbridge"] / by_name["canal-python"], 2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
