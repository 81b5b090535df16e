"""Initial load: a 10-column table of ``--rows`` rows snapshotted from MariaDB into an empty Iceberg table.

A private MariaDB and the real Canal server (``make real-stack``) on this
machine. The rows are loaded before Canal's destination starts (so only the
snapshot brings them); then, in the same run:

1. the source's own limit: the ``mariadb`` client reading ``SELECT *`` of the
   table and discarding it (rows/s);
2. the snapshot: a job with ``[job.snapshot]`` (``--chunk-rows``,
   ``--parallelism``) starts on the idle stream; the figure is rows/s from job
   start until the table's snapshot finished, beside the client's;
3. Spark's own ceiling on this machine: the same table copied by Spark alone
   (JDBC with one predicate per ``--chunk-rows`` keys, Spark's own types,
   into a new Iceberg table in one ``INSERT``), on the Spark the snapshot
   warmed; beside the snapshot's warm rate (from its first chunk landed on);
4. with ``--write-rate``, a second table of the same size is snapshotted while
   a process writes that many row changes/s into it (the stream busy);
5. with ``--parts``, where a chunk's time goes: for the first chunks of the
   table, one after the other on an idle machine, the read as the snapshot
   reads and holds it, its insert into an Iceberg table converted as the
   writer converts it, and beside them Spark's copy of the same keys.

Each target is checked against MariaDB (rows and two column sums). Prints
progress every few seconds, one JSON line per run, then a summary line.

    .venv/bin/python -m bench.snapshot --rows 10000000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bench import sql_workload
from bench.common import RssPeaks, cpu_seconds, local_spark_settings, spark_pid
from canalbridge.daemon.logs import configure_logging
from canalbridge.source_db import ChunkPlanner, SourceDb, table_columns, table_key
from canalbridge.source_db.chunks import chunk_predicate
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot.chunking import groups, source_columns
from canalbridge.sync.snapshot.source import SnapshotSource
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.chunk_read import JdbcSource, SparkChunkReader
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings
from spark_sink.sink import make_sink
from spark_sink.types import convert
from tests.infra.canal_server import CanalDestination, CanalServer
from tests.infra.mariadb import MariaDBServer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DB = "snapbench"
SIGNALS = "canalbridge_signal"
USER, PASSWORD = "snapshotter", os.urandom(8).hex()
LOAD_STEP = 1_000_000  # rows per INSERT ... SELECT of the load
# Values of every column from the row's number: the load is one statement per million rows, in MariaDB alone.
LOAD_SELECT = ("SELECT seq, seq % 100000, CONCAT('name-', seq), (seq % 100000) / 100, "
               "TIMESTAMP('2024-01-01') + INTERVAL seq SECOND, seq * 7, seq % 977, CONCAT('note ', seq % 9973), "
               "(seq % 31337) / 10, TIMESTAMP('2020-06-01') + INTERVAL (seq % 86400) SECOND FROM seq_{low}_to_{high}")


def prepare(mariadb: MariaDBServer, tables: list[str], rows: int) -> JdbcSource:
    """Database ``DB`` with ``tables`` of ``rows`` rows each (out of the binlog), the signal table, and the
    snapshot's login (what docs/guide/snapshot.md grants it)."""
    mariadb.create_database(DB)
    mariadb.execute(*(sql_workload.create_table_sql(DB, table) for table in tables),
                    SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
    mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS)
    for table in tables:
        load(mariadb, table, rows)
    return JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD)


def load(mariadb: MariaDBServer, table: str, rows: int) -> float:
    """Fill ``table`` with ``rows`` rows, out of the binlog; the seconds it took."""
    started = time.perf_counter()
    with mariadb.connection(DB, autocommit=False) as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")  # Canal starts after the load: nothing to stream
        for low in range(1, rows + 1, LOAD_STEP):
            high = min(low + LOAD_STEP - 1, rows)
            cursor.execute(f"INSERT INTO {table} {LOAD_SELECT.format(low=low, high=high)}")
            conn.commit()
            print(f"load {table}: {high:,} of {rows:,} rows", flush=True)
    return time.perf_counter() - started


def client_limit(mariadb: MariaDBServer, table: str, rows: int) -> float:
    """Rows/s of the ``mariadb`` client reading the whole table and discarding it."""
    arguments = mariadb.connect_arguments()
    command = ["mariadb", "-h", arguments["host"], "-P", str(arguments["port"]), "-u", arguments["user"], "-q",
               "-N", "-e", f"SELECT * FROM {DB}.{table}"]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=3600,
                   env={**os.environ, "MYSQL_PWD": arguments["password"]})  # (never on the command line)
    return rows / (time.perf_counter() - started)


def snapshot(source: JdbcSource, connect: dict[str, Any], canal: CanalSettings, spark_settings: SparkSettings,
             table: str, rows: int, *, interval: float, chunk_rows: int | None = None,
             parallelism: int | None = None, write_rate: float = 0, check: bool = True,
             timeout_s: float = 3600.0) -> dict[str, Any]:
    """One job that snapshots ``table`` of ``DB`` through Canal's destination ``canal`` (while ``write_rate`` row
    changes/s go into it, if given), reading it as ``source``'s user, into ``CATALOG.DB.table``; its figures.

    ``chunk_rows`` and ``parallelism``: ``[job.snapshot]``'s (None: its defaults). ``connect``: a login that may
    write, for the writes and (``check``, on an idle stream) the check of the target against MariaDB.
    ``seconds_from_launch`` counts from before this process's Spark is started (already running for a second
    snapshot: then it is the job's time). Gives up after ``timeout_s``."""
    started_launch = time.perf_counter()
    spark = get_spark(spark_settings)
    target = f"{spark_settings.catalog}.{DB}.{table}"
    defaults = SnapshotSettings(host=source.host, port=source.port, user=source.user, password=source.password,
                                signal_table=f"{DB}.{SIGNALS}")
    snapshot_settings = dataclasses.replace(defaults, chunk_rows=chunk_rows or defaults.chunk_rows,
                                            parallelism=parallelism or defaults.parallelism)
    settings = JobSettings(f"snap_{table}", canal, (ChannelSettings(f"{DB}.{table}", target),),
                           CommitSettings(interval_seconds=interval, min_events=1, min_bytes=1),
                           snapshot=snapshot_settings)
    reader = SnapshotSource(lambda: SourceDb(source.host, source.port, source.user, source.password),
                            SparkChunkReader(lambda: spark, source))
    job = SyncJob(settings, lambda channel: make_sink(spark, channel, settings.name, spark_settings),
                  snapshot=reader)
    writer = _start_writer(connect, table, rows, write_rate) if write_rate else None
    jvm = spark_pid(spark)
    started, cpu_started, jvm_started = time.perf_counter(), time.process_time(), cpu_seconds(jvm)
    job.start()
    last_print = started
    first: tuple[float, int] | None = None  # (when, rows) the first chunk was seen landed: Spark warm from there
    try:
        runner = job.snapshot
        assert runner is not None
        with RssPeaks({"python": os.getpid(), "spark_jvm": jvm}) as peaks:
            while not runner.finished.wait(0.2):
                now = time.perf_counter()
                if job.state.value != "RUNNING":
                    raise SystemExit(f"the job stopped: {job.fail_message}")
                if now - started > timeout_s:
                    raise SystemExit(f"the snapshot of {table} did not finish in {timeout_s:g} s")
                status = runner.status().get(f"{DB}.{table}")
                done = status.rows if status else 0
                if first is None and done:
                    first = (now, done)
                if now - last_print >= 5:
                    last_print = now
                    print(f"snapshot {table}: {done:,} of {rows:,} rows, {done / (now - started):,.0f} rows/s, "
                          f"Python RSS {peaks.mb['python']:.0f} MB", flush=True)
        ended = time.perf_counter()
        cpu, jvm_cpu = time.process_time() - cpu_started, cpu_seconds(jvm) - jvm_started
        seconds = ended - started
        warm = (rows - first[1]) / (ended - first[0]) if first and ended > first[0] and rows > first[1] else None
    finally:
        if writer is not None:
            writer.terminate()
            writer.join(60)
        job.shutdown()
    matches = None if write_rate or not check else \
        sql_workload.target_summary(spark, target) == sql_workload.table_summary(connect, table)
    return {"run": f"snapshot{'_under_writes' if write_rate else ''}", "rows": rows, "seconds": round(seconds, 1),
            "seconds_from_launch": round(ended - started_launch, 1), "rows_per_second": round(rows / seconds),
            "warm_rows_per_second": round(warm) if warm is not None else None,
            "chunk_rows": snapshot_settings.chunk_rows, "parallelism": snapshot_settings.parallelism,
            "write_rate": write_rate, "python_cpu_s": round(cpu, 1), "spark_jvm_cpu_s": round(jvm_cpu, 1),
            "peak_python_rss_mb": peaks.mb["python"], "peak_jvm_rss_mb": peaks.mb["spark_jvm"],
            "target_matches_mariadb": matches}


def spark_copy(mariadb: MariaDBServer, args: argparse.Namespace, table: str, rows: int) -> dict[str, Any]:
    """Spark alone copying ``table`` into a new Iceberg table: the JDBC read split as a snapshot's chunks split
    it (one predicate per ``chunk_rows`` keys, ``parallelism`` at a time on ``local[2]``), Spark's own types,
    one ``INSERT``. No watermark, no conversion from Canal's text, one commit."""
    spark = get_spark(local_spark_settings(args.root))
    source = JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD)
    bounds = range(0, rows, args.chunk_rows)
    predicates = [f"id > {low} AND id <= {low + args.chunk_rows}" for low in bounds]
    frame = spark.read.jdbc(source.url, f"{DB}.{table}", predicates=predicates,
                            properties=source.properties())
    target = f"lake.{DB}.{table}_copy"
    spark.sql(f"DROP TABLE IF EXISTS {target}")
    frame.limit(0).writeTo(target).using("iceberg").create()
    print(f"spark copy {table}: {len(predicates)} reads of {args.chunk_rows:,} keys", flush=True)
    started = time.perf_counter()
    frame.writeTo(target).append()
    seconds = time.perf_counter() - started
    count = spark.table(target).count()
    return {"run": "spark_jdbc_copy", "rows": rows, "seconds": round(seconds, 1),
            "rows_per_second": round(rows / seconds), "target_matches_mariadb": count == rows}


def parts(mariadb: MariaDBServer, args: argparse.Namespace, table: str) -> dict[str, Any]:
    """Seconds per chunk (``chunk_rows`` x ``parallelism`` keys) of each part of a snapshot's work, one part after
    the other: the read held as a snapshot holds it (one Spark job reads, holds and counts), then its insert,
    converted as the writer converts a chunk, into an Iceberg table; beside them Spark's own copy of the same
    keys (its types, one insert). The means leave the first chunk out (Spark warming up)."""
    from pyspark.sql import functions as F

    spark = get_spark(local_spark_settings(args.root))
    source = JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD)
    reader = SparkChunkReader(lambda: spark, source)
    with SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db:
        key = table_key(db, DB, table)
        columns = source_columns(table_columns(db, key.schema, key.table), key)
        chunks = list(groups(ChunkPlanner(db, key, args.chunk_rows).ranges(), args.parallelism))[:args.parts]
    target, copy = f"lake.{DB}.{table}_parts", f"lake.{DB}.{table}_parts_copy"
    measured: list[tuple[float, float, float]] = []
    for number, ranges in enumerate(chunks, 1):
        started = time.perf_counter()
        read = reader.read(key, columns, ranges)
        held = time.perf_counter()
        typed = cast("DataFrame", read.handle).select(*[
            convert(F.col(f"c{index}"), column.mysql_type).alias(column.name) for index, column in enumerate(columns)])
        if number == 1:
            for name in (target, copy):
                spark.sql(f"DROP TABLE IF EXISTS {name}")
            typed.limit(0).writeTo(target).using("iceberg").create()
        typed.writeTo(target).append()
        inserted = time.perf_counter()
        reader.release(read.handle)
        frame = spark.read.jdbc(source.url, key.sql_table, predicates=[chunk_predicate(key.columns, r) for r in ranges],
                                properties=source.properties())
        if number == 1:
            frame.limit(0).writeTo(copy).using("iceberg").create()
        frame.writeTo(copy).append()
        copied = time.perf_counter()
        measured.append((held - started, inserted - held, copied - inserted))
        print(f"parts of chunk {number} ({read.count:,} rows): read and hold {measured[-1][0]:.2f} s, insert "
              f"{measured[-1][1]:.2f} s; Spark's copy {measured[-1][2]:.2f} s", flush=True)
    warm = measured[1:] or measured
    read_s, insert_s, copy_s = (sum(m[part] for m in warm) / len(warm) for part in range(3))
    return {"run": "parts", "chunk_keys": args.chunk_rows * args.parallelism, "chunks": len(warm),
            "read_and_hold_s": round(read_s, 2), "insert_s": round(insert_s, 2),
            "snapshot_parts_s": round(read_s + insert_s, 2), "spark_copy_s": round(copy_s, 2),
            "parts_share_of_copy": round(copy_s / (read_s + insert_s), 3)}


def _start_writer(connect: dict[str, Any], table: str, rows: int, rate: float) -> Any:
    context = multiprocessing.get_context("spawn")  # never fork a process that runs a JVM bridge
    process = context.Process(target=_write, args=(connect, table, rows, rate),
                              name="sql-writes", daemon=True)
    process.start()
    return process


def _write(connect: dict[str, Any], table: str, rows: int, rate: float) -> None:
    """Updates of random rows at ``rate`` per second, 100 per transaction, until terminated."""
    import random

    import pymysql

    rng = random.Random(3)
    conn = pymysql.connect(**{**connect, "autocommit": False})
    with conn.cursor() as cursor:
        while True:
            started = time.perf_counter()
            for _ in range(100):
                cursor.execute(f"UPDATE {table} SET c5 = c5 + 1 WHERE id = %s", (rng.randint(1, rows),))
            conn.commit()
            time.sleep(max(100 / rate - (time.perf_counter() - started), 0))  # paces the writes only


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows in the table")
    parser.add_argument("--chunk-rows", type=int, default=100_000, help="[job.snapshot] chunk_rows")
    parser.add_argument("--parallelism", type=int, default=4, help="[job.snapshot] parallelism")
    parser.add_argument("--interval", type=float, default=1.0, help="commit interval, seconds")
    parser.add_argument("--write-rate", type=float, default=0,
                        help="also snapshot a second table while this many row changes/s go into it")
    parser.add_argument("--parts", type=int, default=0,
                        help="also time the parts of this many chunks, one after the other (5.)")
    parser.add_argument("--log-level", default="warning",
                        help="the daemon's log level (info: each chunk's read and wait, in seconds)")
    parser.add_argument("--root", default=None, help="where MariaDB, Canal and the warehouse live (default: a "
                                                      "temporary directory)")
    args = parser.parse_args()
    configure_logging(args.log_level, "console")
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as scratch:
        args.root = args.root or scratch
        root = Path(args.root)
        results = []
        with MariaDBServer(root / "mariadb") as mariadb:
            tables = ["events"] + (["busy"] if args.write_rate else [])
            source = prepare(mariadb, tables, args.rows)
            limit = client_limit(mariadb, "events", args.rows)
            results.append({"run": "mariadb_client", "rows": args.rows, "rows_per_second": round(limit)})
            print(json.dumps(results[-1]), flush=True)
            destination = CanalDestination(DB, filter_regex=rf"{DB}\..*")
            with CanalServer(root / "canal", mariadb, [destination], password=os.urandom(8).hex(),
                             heap_min="256m", heap_max="512m") as canal:
                for table, rate in zip(tables, (0, args.write_rate)):
                    results.append(snapshot(source, mariadb.connect_arguments(DB),
                                            canal.canal_settings(DB, poll_timeout_ms=100),
                                            local_spark_settings(args.root), table, args.rows,
                                            interval=args.interval, chunk_rows=args.chunk_rows,
                                            parallelism=args.parallelism, write_rate=rate))
                    print(json.dumps(results[-1]), flush=True)
            results.append(spark_copy(mariadb, args, "events", args.rows))
            print(json.dumps(results[-1]), flush=True)
            if args.parts:
                print(json.dumps(parts(mariadb, args, "events")), flush=True)
        stop_spark()
    idle = next(r for r in results if r["run"] == "snapshot")
    copy = results[-1]["rows_per_second"]
    print(json.dumps({"summary": "snapshot", "rows": args.rows, "snapshot_rows_per_second": idle["rows_per_second"],
                      "snapshot_warm_rows_per_second": idle["warm_rows_per_second"],
                      "client_rows_per_second": round(limit), "spark_copy_rows_per_second": copy,
                      "share_of_client": round(idle["rows_per_second"] / limit, 3),
                      "warm_share_of_spark_copy": round((idle["warm_rows_per_second"] or 0) / copy, 3),
                      "under_writes_rows_per_second": next((r["rows_per_second"] for r in results
                                                            if r["run"] == "snapshot_under_writes"), None)}),
          flush=True)


if __name__ == "__main__":
    threading.current_thread().name = "bench-snapshot"
    main()
