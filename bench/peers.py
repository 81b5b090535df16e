"""Peers: Flink CDC and canalbridge side by side, each replaying one MariaDB binlog into an empty Iceberg warehouse.

One private MariaDB. Before any clock starts, ``--rows`` row changes are
written into it with SQL (:mod:`bench.sql_workload`: three ten-column tables
with a BIGINT key, 60% inserts, 30% updates, 10% deletes, one row per
statement, ``--statements`` statements per transaction), then one last
transaction inserts a sentinel row into each table. Then each pipeline in
turn replays that binlog from the same start position (just before the
workload) into a warehouse of its own, committing every ``--interval``
seconds:

1. Flink CDC (:mod:`bench.flink_cdc`: its MySQL CDC source, one binlog
   reader for the three tables, into Iceberg's Flink sink in upsert mode,
   parallelism ``--parallelism``, in one JVM); its clock stops when a data
   file holding the sentinel is committed to every table.
2. canalbridge: the real Canal server (a store of ``--canal-store`` KB in
   ``MEMSIZE`` mode, and ``canal.instance.filter.query.dml = true`` so that
   MariaDB's annotated SQL does not double the entries) and a job in this
   process (gets of ``--batch-size`` KB, commit bounds ``--min-mb`` /
   ``--max-mb``, Spark ``local[2]`` with the JVM decoder, maintenance off);
   its clock stops when the sentinel's transaction is acked, which follows
   its commit.
3. recorded, the bridge alone: Canal's stream of the same binlog, recorded
   once by a plain client, served from memory by a dev server that holds
   all of it before the clock starts (``devserver --preload``), into the
   same job settings, in a process of its own. Canal's store no longer
   cuts the commits here, so they are larger.
4. the initial load (``--load-rows``, 0 for none): a table of that many
   rows, loaded out of the binlog into a database of its own
   (:mod:`bench.snapshot`'s), read first by the ``mariadb`` client (the
   ceiling), then by Flink CDC (the same job, startup mode ``initial``: its
   incremental snapshot, its default chunk size, parallelism
   ``--parallelism``) and by canalbridge's snapshot (``[job.snapshot]``'s
   defaults, a Canal server of its own for the watermarks, in a process of
   its own, Spark cold), each into the same kind of target as above and
   committing every ``--load-interval`` seconds; each clock stops when the
   last row is visible (Flink: every row counted in the table's current
   snapshot; canalbridge: the snapshot finished, every chunk committed).

``--upsert-deletes`` picks canalbridge's write path for both of its runs
(``[spark] upsert_deletes``; default ``auto``, as the daemon's).

Every pipeline starts cold: Flink's JVM and each run's Spark JVM are new.
For each: seconds (from the job's start, and from the launch of its first
process: Flink's JVM, Canal's JVM), row changes/s, CPU µs per row change of
each of its processes (``bridge_cpu_us_per_row``: the bridge's own, without
its source, Flink's whole JVM for Flink; ``pipeline_cpu_us_per_row``: with
the source), and whether every table equals MariaDB's (rows and two column
sums). Then what readers pay for Flink's and canalbridge's tables: a full
scan of every table (Spark, every column), the same compaction on both
warehouses (the daemon's maintenance's own), and the scan again, with the
tables' data and delete files before and after.

    .venv/bin/python -m bench.peers --rows 1000000 --load-rows 10000000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import flink_cdc, sql_workload
from bench import snapshot as load_bench
from bench.common import (
    LagRecorder,
    RssPeaks,
    add_commit_arguments,
    bench_row,
    commit_settings,
    cpu_seconds,
    drain,
    drain_into_iceberg,
    in_child,
    local_spark_settings,
    run_result,
    spark_pid,
)
from bench.readers import reading_cost
from canalbridge.canal.connector import CanalConnector
from canalbridge.daemon.logs import configure_logging
from canalbridge.devkit.catalog import narrow_table
from canalbridge.devkit.entry_file import write_entries
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, MaintenanceSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.chunk_read import JdbcSource
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings
from spark_sink.sink import make_sink
from tests.infra.canal_server import CanalDestination, CanalServer
from tests.infra.mariadb import MariaDBServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DATABASE = "peers"
TABLES = ("events_1", "events_2", "events_3")
SENTINEL_KEY = 10**15  # above every key the workload writes
FLINK_CATALOG = "flink"  # Flink's warehouse, as this process's Spark names it
TIMEOUT_S = 3600.0
LOAD_TABLE = "events"  # the initial load's, in bench.snapshot's database
VERIFY_HEAP = "12g"  # the Spark that checks the initial loads' targets
VERIFY_DELETE_CACHE_BYTES = 4 << 30  # its executors' cache of delete files (Iceberg's default: 128 MB)
# Targets, each printed beside its figure in the summary:
BRIDGE_CPU_TARGET_US = 35.0  # the daemon's Python and Spark's JVM together, per row change through Canal
RATE_VS_FLINK_TARGET = 0.8  # canalbridge through Canal against Flink CDC, on the same binlog
RECORDED_WARM_RATE_TARGET = 2.0  # the bridge alone, fed Canal's recorded stream, Spark warm, against Flink CDC
LOAD_VS_FLINK_TARGET = 1.5  # the initial load against Flink CDC's
LOAD_SHARE_OF_CLIENT_TARGET = 0.4  # the initial load against the mariadb client's read of the same table
MAINTENANCE_OFF = MaintenanceSettings(enabled=False)


@dataclass(frozen=True)
class Binlog:
    """The workload in MariaDB's binlog: where a replay starts, the sentinel's transaction, the row changes."""

    start: tuple[str, int]
    last: EntryPosition  # the sentinel transaction's end (its Xid event)
    row_changes: int
    sql_seconds: float


def write_workload(mariadb: MariaDBServer, args: argparse.Namespace) -> Binlog:
    """The tables, then the workload and the sentinels: the binlog both pipelines replay."""
    mariadb.create_database(DATABASE)
    mariadb.execute(*(sql_workload.create_table_sql(DATABASE, table) for table in TABLES), database=DATABASE)
    start = mariadb.master_status()
    rounds = max(1, args.rows // sql_workload.ROUND_ROW_CHANGES)
    written = sql_workload.write(mariadb.connect_arguments(DATABASE), TABLES, rounds, label="source",
                                 single_row=True,
                                 rounds_per_transaction=args.statements // sql_workload.ROUND_ROW_CHANGES)
    before = mariadb.master_status()
    sentinel = "(" + ",".join(f"'{value}'" for value in bench_row(SENTINEL_KEY, 0)) + ")"
    mariadb.execute("BEGIN", *(f"INSERT INTO `{table}` VALUES {sentinel}" for table in TABLES), "COMMIT",
                    database=DATABASE)
    last = EntryPosition(*mariadb.last_event_start("Xid", since=before))
    return Binlog(start, last, written["row_changes"] + len(TABLES), written["seconds"])


def run_flink(root: Path, mariadb: MariaDBServer, binlog: Binlog, args: argparse.Namespace) -> dict[str, Any]:
    """Flink CDC's replay into ``root/flink-warehouse``: its figures."""
    warehouse = root / "flink-warehouse"
    # The account Canal reads with, and its grants: what a replication client needs.
    source = flink_cdc.Source(mariadb.host, mariadb.port, mariadb.canal_user, DATABASE, binlog.start)
    tables = [narrow_table(table, schema=DATABASE) for table in TABLES]
    sql = flink_cdc.job_sql(tables, source, warehouse, parallelism=args.parallelism)
    print(f"flink: replaying {binlog.row_changes:,} row changes from {binlog.start[0]}:{binlog.start[1]} "
          f"(parallelism {args.parallelism}, a checkpoint every {args.interval:g} s)", flush=True)
    (key,) = tables[0].key_names
    flink = flink_cdc.run(root / "flink", sql, warehouse, DATABASE, TABLES, flink_cdc.until_sentinel(key, SENTINEL_KEY),
                          password=mariadb.canal_password, parallelism=args.parallelism, checkpoint_s=args.interval,
                          heap=args.flink_heap, timeout_s=TIMEOUT_S)
    return {"pipeline": "flink", "rows": binlog.row_changes, **_flink_figures(flink, binlog.row_changes)}


def _flink_figures(flink: flink_cdc.FlinkRun, rows: int) -> dict[str, Any]:
    """A Flink run's figures: its one JVM is the bridge and the source."""
    jvm = _per_row(flink.cpu_s, rows)
    return {"seconds": round(flink.seconds, 1), "seconds_from_launch": round(flink.seconds_from_launch, 1),
            "rows_per_s": round(rows / flink.seconds),
            "cpu_us_per_row": {"flink_jvm": jvm, "flink_jvm_from_launch": _per_row(flink.cpu_from_launch_s, rows)},
            "bridge_cpu_us_per_row": jvm, "pipeline_cpu_us_per_row": jvm, "peak_jvm_rss_mb": round(flink.peak_rss_mb)}


def run_canalbridge(root: Path, mariadb: MariaDBServer, binlog: Binlog, spark_settings: SparkSettings,
                    args: argparse.Namespace) -> dict[str, Any]:
    """canalbridge's replay, through the real Canal server, into fresh tables ``lake.peers.*``: its figures."""
    commit = commit_settings(args, store_capacity=args.canal_store, store_batch_mode="MEMSIZE")
    spark = get_spark(spark_settings)
    lags: Counter = Counter()
    lock = threading.Lock()
    print(f"canalbridge: starting Canal (store {args.canal_store} KB, MEMSIZE) at {binlog.start[0]}:{binlog.start[1]}",
          flush=True)
    launched = time.perf_counter()
    with _canal(root / "canal", mariadb, binlog, args) as canal:
        assert canal.pid is not None
        canal_settings = canal.canal_settings(DATABASE, batch_size=args.batch_size, poll_timeout_ms=100)
        channels = tuple(ChannelSettings(f"{DATABASE}.{table}", f"{spark_settings.catalog}.{DATABASE}.{table}")
                         for table in TABLES)
        job = SyncJob(JobSettings("peers", canal_settings, channels, commit, MAINTENANCE_OFF),
                      lambda channel: LagRecorder(make_sink(spark, channel, "peers", spark_settings), lags, lock).sink)
        jvm = spark_pid(spark)
        started, cpu_started, jvm_started = time.perf_counter(), time.process_time(), cpu_seconds(jvm)
        canal_started = cpu_seconds(canal.pid)  # what it spent starting, and reading the binlog before the job came
        job.start()
        with RssPeaks({"spark_jvm": jvm, "canal_jvm": canal.pid}) as peaks:
            peak_rss = drain(job, "canalbridge", binlog.last, lags, started, TIMEOUT_S)
        ended = time.perf_counter()
        cpu, jvm_cpu = time.process_time() - cpu_started, cpu_seconds(jvm) - jvm_started
        canal_cpu = cpu_seconds(canal.pid)
        job.pause()
    rows = binlog.row_changes
    figures = run_result("canalbridge", rows, ended - started, job, lags, peak_rss, cpu_s=cpu)
    cpu_figures = _bridge_cpu(cpu, jvm_cpu, rows, {"canal_jvm": canal_cpu - canal_started,
                                                   "canal_jvm_from_launch": canal_cpu}, "canal_jvm_from_launch")
    return {"pipeline": "canalbridge", "rows": rows, "seconds": figures["seconds"],
            "seconds_from_launch": round(ended - launched, 1), "rows_per_s": figures["rows_per_s"], **cpu_figures,
            "commits": figures["commits"], "peak_python_rss_mb": figures["peak_python_rss_mb"],
            "peak_jvm_rss_mb": peaks.mb}


def _canal(root: Path, mariadb: MariaDBServer, binlog: Binlog, args: argparse.Namespace) -> CanalServer:
    """A Canal server whose destination ``peers`` starts at the workload's start, as a careful user sets it:
    MariaDB's annotated SQL dropped (``filter.query.dml``), the store ``--canal-store`` KB."""
    destination = CanalDestination(DATABASE, filter_regex=rf"{DATABASE}\..*", properties={
        "canal.instance.master.journal.name": binlog.start[0],
        "canal.instance.master.position": str(binlog.start[1]),
        "canal.instance.filter.query.dml": "true"})
    return CanalServer(root, mariadb, [destination], password=os.urandom(8).hex(), heap_min="1g", heap_max="1g",
                       server_properties={"canal.instance.memory.buffer.size": str(args.canal_store)})


@dataclass(frozen=True)
class Recording:
    """Canal's stream saved as an entries file (``canalbridge.devkit.entry_file``'s format)."""

    path: Path
    entries: int

    @property
    def store_capacity(self) -> int:
        """A dev-server store (``MEMSIZE``) that holds every entry: slots, and KB."""
        return 1 << max(self.entries, self.path.stat().st_size // 1024).bit_length()


def record_canal_stream(root: Path, mariadb: MariaDBServer, binlog: Binlog, args: argparse.Namespace) -> Recording:
    """What Canal hands out for the same binlog from the same start, saved: the recorded stream the
    bridge-alone run replays."""
    path = root / "canal-stream.entries"
    print("recording Canal's stream of the same binlog for the bridge-alone run", flush=True)

    def stream(connector: CanalConnector) -> Iterator[entry_pb.Entry]:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            batch = connector.get_without_ack(args.batch_size, timeout_ms=100)
            yield from batch.entries
            connector.ack(batch.batch_id)
            if batch.entries and EntryPosition.of(batch.entries[-1]) >= binlog.last:
                return
        raise SystemExit(f"Canal did not hand out {binlog.last} in {TIMEOUT_S:g} s")

    with _canal(root / "canal-recording", mariadb, binlog, args) as canal, \
            canal.connector(DATABASE, so_timeout_s=120) as connector:
        connector.subscribe(rf"{DATABASE}\..*")
        entries = write_entries(path, stream(connector))
    print(f"recorded {entries:,} entries ({path.stat().st_size / 2**20:,.0f} MB) into {path}", flush=True)
    return Recording(path, entries)


def run_recorded(recording: Recording, binlog: Binlog, spark_settings: SparkSettings,
                 args: argparse.Namespace) -> dict[str, Any]:
    """The bridge alone: Canal's recorded stream served from memory by a dev server, with the same job settings,
    in a process of its own, twice: into fresh tables ``lake.recorded.*`` with Spark's JVM cold, as the other
    two pipelines' start, then (``--warm``, the default) into ``lake.recorded_warm.*`` in the same JVM, warm, as
    a daemon's runs after its first minutes. The cold run's figures, the warm one's under ``warm``."""
    # The whole stream waits in the store (read before the clock starts), so the source costs next to
    # nothing per row; Canal's store no longer cuts commits, the job's bounds and interval do.
    commit = commit_settings(args, store_capacity=recording.store_capacity, store_batch_mode="MEMSIZE")
    print(f"recorded: the bridge alone, fed Canal's stream from memory (a {recording.store_capacity} KB store), "
          f"with Spark cold{', then again warm' if args.warm else ''}", flush=True)
    return in_child("recorded", _drain_recorded, recording.path, binlog.last, binlog.row_changes, spark_settings,
                    commit, args.batch_size, args.warm)


def _drain_recorded(path: Path, last: EntryPosition, rows: int, spark_settings: SparkSettings,
                    commit: CommitSettings, batch_size: int, warm: bool) -> dict[str, Any]:
    runs = []
    for name in ("recorded", "recorded_warm") if warm else ("recorded",):
        drained = drain_into_iceberg(name, path, last, [narrow_table(table, schema=DATABASE) for table in TABLES],
                                     spark_settings, commit, maintenance=MAINTENANCE_OFF, timeout_s=TIMEOUT_S,
                                     preload=True, batch_size=batch_size)
        figures = run_result(name, rows, drained.elapsed_s, drained.job, drained.lags, drained.peak_rss_mb,
                             cpu_s=drained.cpu_s)
        runs.append({"seconds": figures["seconds"], "rows_per_s": figures["rows_per_s"],
                     **_bridge_cpu(drained.cpu_s, drained.jvm_cpu_s, rows, {"source": drained.source_cpu_s}, "source"),
                     "commits": figures["commits"], "peak_python_rss_mb": figures["peak_python_rss_mb"],
                     "peak_jvm_rss_mb": {"spark_jvm": drained.peak_jvm_rss_mb}})
    return {"pipeline": "recorded", "rows": rows, **runs[0], **({"warm": runs[1]} if warm else {})}


def run_load(root: Path, mariadb: MariaDBServer, spark_settings: SparkSettings,
             args: argparse.Namespace) -> dict[str, Any]:
    """The initial load of one table of ``--load-rows`` rows: the ``mariadb`` client's read, Flink CDC's snapshot
    and canalbridge's, one after the other; their figures."""
    rows = args.load_rows
    print(f"load: {rows:,} rows into {load_bench.DB}.{LOAD_TABLE}, out of the binlog", flush=True)
    login = load_bench.prepare(mariadb, [LOAD_TABLE], rows)
    client = round(load_bench.client_limit(mariadb, LOAD_TABLE, rows))
    print(f"load: the mariadb client reads {client:,} rows/s", flush=True)

    warehouse = root / "flink-warehouse"
    table = narrow_table(LOAD_TABLE, schema=load_bench.DB)
    source = flink_cdc.Source(mariadb.host, mariadb.port, mariadb.canal_user, load_bench.DB)  # no start: initial
    sql = flink_cdc.job_sql([table], source, warehouse, parallelism=args.parallelism)
    print(f"flink: the initial load (startup mode initial, parallelism {args.parallelism}, a checkpoint every "
          f"{args.load_interval:g} s)", flush=True)
    flink = flink_cdc.run(root / "flink-load", sql, warehouse, load_bench.DB, [LOAD_TABLE],
                          flink_cdc.until_records(rows), password=mariadb.canal_password,
                          parallelism=args.parallelism, checkpoint_s=args.load_interval, heap=args.flink_heap,
                          timeout_s=TIMEOUT_S)

    print("canalbridge: the initial load (its snapshot's defaults, Spark cold, a commit interval of "
          f"{args.load_interval:g} s)", flush=True)
    destination = CanalDestination(load_bench.DB, filter_regex=rf"{load_bench.DB}\..*")
    with CanalServer(root / "canal-load", mariadb, [destination], password=os.urandom(8).hex(), heap_min="256m",
                     heap_max="512m") as canal:
        assert canal.pid is not None
        canal_started = cpu_seconds(canal.pid)
        with RssPeaks({"canal_jvm": canal.pid}) as peaks:
            snapshot = in_child("load", _snapshot, login, mariadb.connect_arguments(load_bench.DB),
                                canal.canal_settings(load_bench.DB, poll_timeout_ms=100), spark_settings, rows,
                                args.load_interval)
        canal_cpu = cpu_seconds(canal.pid)
    canalbridge = {"seconds": snapshot["seconds"], "seconds_from_launch": snapshot["seconds_from_launch"],
                   "rows_per_s": snapshot["rows_per_second"], "warm_rows_per_s": snapshot["warm_rows_per_second"],
                   "chunk_rows": snapshot["chunk_rows"], "parallelism": snapshot["parallelism"],
                   **_bridge_cpu(snapshot["python_cpu_s"], snapshot["spark_jvm_cpu_s"], rows,
                                 {"canal_jvm": canal_cpu - canal_started, "canal_jvm_from_launch": canal_cpu},
                                 "canal_jvm_from_launch"),
                   "peak_python_rss_mb": snapshot["peak_python_rss_mb"],
                   "peak_jvm_rss_mb": {"spark_jvm": snapshot["peak_jvm_rss_mb"], **peaks.mb}}
    return {"pipeline": "load", "rows": rows, "mariadb_client_rows_per_s": client,
            "flink": _flink_figures(flink, rows),
            "canalbridge": canalbridge}


def _snapshot(login: JdbcSource, connect: dict[str, Any], canal: CanalSettings, spark_settings: SparkSettings,
              rows: int, interval: float) -> dict[str, Any]:
    # (verify_load checks the target, with the heap Flink's needs.)
    return load_bench.snapshot(login, connect, canal, spark_settings, LOAD_TABLE, rows, interval=interval, check=False,
                               timeout_s=TIMEOUT_S)


def verify_load(load: dict[str, Any], mariadb: MariaDBServer, spark_settings: SparkSettings) -> None:
    """Check each initial load's target against its MariaDB table (rows and two column sums), timing the full
    scan that takes, into ``load``.

    In a Spark of its own with a large heap: Flink's target holds an equality delete for every row, one
    file per checkpoint, and a reader merges every later checkpoint's deletes into one set for each data
    file (a 2 GB heap ran out on 10M rows).
    """
    source = sql_workload.table_summary(mariadb.connect_arguments(load_bench.DB), LOAD_TABLE)
    settings = dataclasses.replace(spark_settings, conf={**spark_settings.conf, "spark.driver.memory": VERIFY_HEAP,
                                                         "spark.sql.iceberg.executor-cache.max-total-size":
                                                             str(VERIFY_DELETE_CACHE_BYTES)})
    targets = {"flink": f"{FLINK_CATALOG}.{load_bench.DB}.{LOAD_TABLE}",
               "canalbridge": f"{spark_settings.catalog}.{load_bench.DB}.{LOAD_TABLE}"}
    print(f"load: checking both targets against MariaDB (a Spark of its own, a {VERIFY_HEAP} heap)", flush=True)
    scans = in_child("verify-load", _scan_targets, settings, targets)
    for name, target in targets.items():
        landed, seconds = scans[name]
        if landed != source:
            print(f"{target} differs from MariaDB: {landed} against {source}", flush=True)
        load[name].update({"target_matches_mariadb": landed == source, "full_scan_s": seconds})


def _scan_targets(spark_settings: SparkSettings, targets: dict[str, str]) -> dict[str, Any]:
    """Each target's summary, and the seconds of its second full scan (the first warms the JVM up)."""
    spark = get_spark(spark_settings)
    scans = {}
    for name, target in [*targets.items(), *targets.items()]:
        started = time.perf_counter()
        scans[name] = (sql_workload.target_summary(spark, target), round(time.perf_counter() - started, 1))
    return scans


def _bridge_cpu(python_cpu_s: float, spark_cpu_s: float, rows: int, sources: dict[str, float],
                pipeline: str) -> dict[str, Any]:
    """canalbridge's CPU per row: the daemon's Python and Spark's JVM (the bridge's own), and its source's
    (``sources``, CPU seconds by name); the pipeline's adds the bridge's and ``sources[pipeline]``."""
    per_row = {"daemon_python": _per_row(python_cpu_s, rows), "spark_jvm": _per_row(spark_cpu_s, rows),
               **{name: _per_row(cpu_s, rows) for name, cpu_s in sources.items()}}
    bridge = round(per_row["daemon_python"] + per_row["spark_jvm"], 2)
    return {"cpu_us_per_row": per_row, "bridge_cpu_us_per_row": bridge,
            "pipeline_cpu_us_per_row": round(bridge + per_row[pipeline], 2)}


def _per_row(cpu_s: float, rows: int) -> float:
    return round(cpu_s / rows * 1e6, 2)


def verify(spark: SparkSession, mariadb: MariaDBServer, namespace: str) -> bool:
    """Whether every table under ``namespace`` (``catalog.database``) equals MariaDB's (rows and two column
    sums)."""
    connect = mariadb.connect_arguments(DATABASE)
    same = True
    for table in TABLES:
        source = sql_workload.table_summary(connect, table)
        target = sql_workload.target_summary(spark, f"{namespace}.{table}")
        if target != source:
            print(f"{namespace}.{table} differs from MariaDB: {target} against {source}", flush=True)
            same = False
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="row changes written (rounded to 100)")
    parser.add_argument("--statements", type=int, default=500, help="statements per source transaction")
    parser.add_argument("--parallelism", type=int, default=2, help="Flink's parallelism")
    parser.add_argument("--flink-heap", default="2g", help="Flink's JVM heap")
    parser.add_argument("--canal-store", type=int, default=262144,
                        help="Canal's canal.instance.memory.buffer.size, KB in MEMSIZE mode")
    parser.add_argument("--batch-size", type=int, default=4096, help="a get's size, KB in MEMSIZE mode")
    add_commit_arguments(parser)
    parser.set_defaults(min_mb=128, max_mb=256)  # bounds a careful user sets for a backlog of this size
    parser.add_argument("--warm", action=argparse.BooleanOptionalAction, default=True,
                        help="run the recorded stream a second time with Spark warm")
    parser.add_argument("--load-rows", type=int, default=10_000_000,
                        help="rows of the initial load's table (0: no initial load)")
    parser.add_argument("--load-interval", type=float, default=1.0,
                        help="Flink's checkpoint interval and canalbridge's commit interval in the initial load, "
                             "seconds")
    parser.add_argument("--only", choices=("flink", "canalbridge", "recorded", "load"), help="run one pipeline")
    parser.add_argument("--workdir", type=Path, help="for MariaDB, Canal, Flink, the warehouses (default: a temp dir)")
    args = parser.parse_args()
    if args.only == "load" and args.load_rows <= 0:
        parser.error("--only load needs --load-rows above 0")
    if args.statements <= 0 or args.statements % sql_workload.ROUND_ROW_CHANGES:
        parser.error(f"--statements: a multiple of {sql_workload.ROUND_ROW_CHANGES} (a round's statements)")
    configure_logging("warning")

    root = (args.workdir or Path(tempfile.mkdtemp(prefix="canalbridge-bench-peers-"))).resolve()
    spark_settings = local_spark_settings(root, args.decoder, args.upsert_deletes)
    flink_warehouse = root / "flink-warehouse"
    spark_settings = dataclasses.replace(spark_settings, conf={
        f"spark.sql.catalog.{FLINK_CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{FLINK_CATALOG}.type": "hadoop",
        f"spark.sql.catalog.{FLINK_CATALOG}.warehouse": f"file://{flink_warehouse}"})
    print(f"starting MariaDB in {root}", flush=True)
    results: dict[str, dict[str, Any]] = {}
    load: dict[str, Any] | None = None
    runs = [args.only] if args.only else ["flink", "canalbridge", "recorded"] + (["load"] if args.load_rows else [])
    binlog: Binlog | None = None
    with MariaDBServer(root / "mariadb") as mariadb:
        if set(runs) - {"load"}:
            binlog = write_workload(mariadb, args)
        if "flink" in runs:
            assert binlog is not None
            results["flink"] = run_flink(root, mariadb, binlog, args)
            print(json.dumps(results["flink"]), flush=True)
        if "canalbridge" in runs:
            assert binlog is not None
            results["canalbridge"] = run_canalbridge(root, mariadb, binlog, spark_settings, args)
            print(json.dumps(results["canalbridge"]), flush=True)
        if "recorded" in runs:
            assert binlog is not None
            recording = record_canal_stream(root, mariadb, binlog, args)
            results["recorded"] = run_recorded(recording, binlog, spark_settings, args)
            print(json.dumps(results["recorded"]), flush=True)
            if args.workdir is None:
                recording.path.unlink()  # hundreds of MB
        if "load" in runs:
            load = run_load(root, mariadb, spark_settings, args)
            verify_load(load, mariadb, spark_settings)
            print(json.dumps(load), flush=True)
        spark = get_spark(spark_settings) if results else None
        namespaces = {"flink": [f"{FLINK_CATALOG}.{DATABASE}"], "canalbridge": [f"{spark_settings.catalog}.{DATABASE}"],
                      "recorded": [f"{spark_settings.catalog}.recorded"] + (
                          [f"{spark_settings.catalog}.recorded_warm"] if args.warm else [])}
        for name, result in results.items():
            assert spark is not None
            result["targets_match_mariadb"] = all([verify(spark, mariadb, namespace)
                                                   for namespace in namespaces[name]])
        for name, catalog in (("flink", FLINK_CATALOG), ("canalbridge", spark_settings.catalog)):
            if name in results:
                assert spark is not None
                print(f"{name}: reading its tables, compacting them, reading them again", flush=True)
                results[name]["readers"] = reading_cost(spark, [f"{catalog}.{DATABASE}.{t}" for t in TABLES])
                print(json.dumps({"pipeline": name, "readers": results[name]["readers"]}), flush=True)
    stop_spark()
    summary = summarize(results, load, binlog, args)
    print(json.dumps(summary), flush=True)
    matches = [result["targets_match_mariadb"] for result in results.values()]
    if load is not None:
        matches += [load["flink"]["target_matches_mariadb"], load["canalbridge"]["target_matches_mariadb"]]
    if not all(matches):
        raise SystemExit("a target differs from its MariaDB table")


def summarize(results: dict[str, dict[str, Any]], load: dict[str, Any] | None, binlog: Binlog | None,
              args: argparse.Namespace) -> dict[str, Any]:
    """The last line: each pipeline's figures against Flink CDC's, and the targets."""
    summary: dict[str, Any] = {
        "benchmark": "peers", "rows": binlog.row_changes if binlog else 0, "tables": len(TABLES),
        "statements_per_transaction": args.statements, "interval_s": args.interval,
        "upsert_deletes": args.upsert_deletes, "sql_seconds": binlog.sql_seconds if binlog else None,
        **{f"{name}_{key}": result[key] for name, result in results.items()
           for key in ("seconds", "rows_per_s", "bridge_cpu_us_per_row", "pipeline_cpu_us_per_row",
                       "targets_match_mariadb")}}
    flink = results.get("flink")
    for name in ("canalbridge", "recorded"):
        if flink and name in results:
            summary[f"{name}_rate_vs_flink"] = round(results[name]["rows_per_s"] / flink["rows_per_s"], 2)
            for cpu in ("bridge_cpu", "pipeline_cpu"):
                summary[f"{name}_{cpu}_vs_flink"] = round(
                    results[name][f"{cpu}_us_per_row"] / flink[f"{cpu}_us_per_row"], 2)
    if "warm" in results.get("recorded", {}):
        warm = results["recorded"]["warm"]
        summary.update({f"recorded_warm_{key}": warm[key]
                        for key in ("seconds", "rows_per_s", "bridge_cpu_us_per_row")})
        if flink:
            summary["recorded_warm_rate_vs_flink"] = round(warm["rows_per_s"] / flink["rows_per_s"], 2)
    if load is not None:
        client = load["mariadb_client_rows_per_s"]
        summary.update({"load_rows": load["rows"], "load_mariadb_client_rows_per_s": client,
                        **{f"load_{name}_{key}": load[name][key] for name in ("flink", "canalbridge")
                           for key in ("seconds", "rows_per_s", "bridge_cpu_us_per_row", "target_matches_mariadb",
                                       "full_scan_s")},
                        "load_canalbridge_vs_flink": round(load["canalbridge"]["rows_per_s"]
                                                           / load["flink"]["rows_per_s"], 2),
                        "load_flink_share_of_client": round(load["flink"]["rows_per_s"] / client, 3),
                        "load_canalbridge_share_of_client": round(load["canalbridge"]["rows_per_s"] / client, 3)})
    targets = (("bridge_cpu_us_per_row", results.get("canalbridge", {}).get("bridge_cpu_us_per_row"),
                BRIDGE_CPU_TARGET_US, False),
               ("rate_vs_flink", summary.get("canalbridge_rate_vs_flink"), RATE_VS_FLINK_TARGET, True),
               ("recorded_warm_rate_vs_flink", summary.get("recorded_warm_rate_vs_flink"), RECORDED_WARM_RATE_TARGET,
                True),
               ("load_vs_flink", summary.get("load_canalbridge_vs_flink"), LOAD_VS_FLINK_TARGET, True),
               ("load_share_of_client", summary.get("load_canalbridge_share_of_client"), LOAD_SHARE_OF_CLIENT_TARGET,
                True))
    for name, figure, target, at_least in targets:
        if figure is not None:
            summary[f"target_{name}"] = target
            summary[f"target_{name}_met"] = figure >= target if at_least else figure <= target
    return summary


if __name__ == "__main__":
    main()
