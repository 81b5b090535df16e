"""What the benchmarks share: cached workload files, a dev server in its own process, RSS, percentiles."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from canalbridge.daemon.logs import configure_logging
from canalbridge.devkit.catalog import narrow_table
from canalbridge.devkit.entries import TableDef
from canalbridge.devkit.entry_file import read_entries, write_entries
from canalbridge.devkit.feeds import rows_in
from canalbridge.devkit.progress import die_with_parent, lag_text
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.sync.channel.maintenance import MaintenanceReport
from canalbridge.sync.channel.sink import CatalogPublisher, ChannelSink, SealedTransaction, StagedWrite
from canalbridge.sync.job.cuts import CutLog
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.changes import BeforeImages, ChangeKind, ChangeRow, RawBatch, RowBatch
from canalbridge.sync.model.cuts import Cut, PublishedCut
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.settings import ChannelSettings, CommitSettings, CutSettings, JobSettings, MaintenanceSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.cuts import IcebergCutLog
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings
from spark_sink.sink import make_sink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CACHE = Path(tempfile.gettempdir())


def add_commit_arguments(parser: argparse.ArgumentParser) -> None:
    """The end-to-end benchmarks' options for when the job commits, and the live run's rate."""
    parser.add_argument("--interval", type=float, default=10.0, help="commit interval, seconds")
    parser.add_argument("--min-events", type=int, default=10_000, help="Doris min_sync_commit_size")
    parser.add_argument("--min-mb", type=float, default=15, help="Doris min_bytes_sync_commit, MB")
    parser.add_argument("--max-mb", type=float, default=64, help="Doris max_bytes_sync_commit, MB")
    parser.add_argument("--rate", type=float, default=0, help="live run rate (default: 80%% of the backlog run)")
    parser.add_argument("--decoder", choices=("auto", "jvm", "python"), default="auto",
                        help="who decodes Canal's rows (spark.decoder)")
    parser.add_argument("--upsert-deletes", choices=("auto", "position", "equality"), default="auto",
                        help="how upsert commits remove the rows they replace (spark.upsert_deletes)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="wait for each commit before reading on (commit.overlap = false)")


def commit_settings(args: argparse.Namespace, *, store_capacity: int, store_batch_mode: str) -> CommitSettings:
    """The job's commit settings from :func:`add_commit_arguments`' options and the Canal store it reads."""
    return CommitSettings(interval_seconds=args.interval, min_events=args.min_events,
                          min_bytes=int(args.min_mb * 2**20), max_bytes=int(args.max_mb * 2**20),
                          store_capacity=store_capacity, store_batch_mode=store_batch_mode,
                          overlap=not args.no_overlap)


def local_spark_settings(root: str | Path, decoder: str = "auto", upsert_deletes: str = "auto") -> SparkSettings:
    """The benchmarks' Spark: ``local[2]``, with the warehouse and spill files under ``root``."""
    return SparkSettings(master="local[2]", warehouse=f"{root}/warehouse", spill_dir=f"{root}/spill", decoder=decoder,
                         upsert_deletes=upsert_deletes)


def bench_tables(count: int) -> tuple[TableDef, ...]:
    """``count`` 10-column tables: bench.events_1 ... bench.events_N."""
    return tuple(narrow_table(f"events_{n}", columns=10) for n in range(1, count + 1))


def workload_file(name: str, tables: Sequence[TableDef], rows: int, *, rows_per_event: int,
                  seed: int = 1) -> tuple[Path, int, Position]:
    """Generate (or reuse) an entries file; return it, its row changes and its last position.

    The workload is 60% inserts, 30% updates (5% of them change the key),
    10% deletes, no NULLs, transactions of 1-50 rows.
    """
    path = CACHE / f"canalbridge-bench-{name}-{rows}-{rows_per_event}-{seed}.entries"
    if not path.exists():
        print(f"generating {rows:,} row changes into {path} (kept for the next run)", flush=True)
        spec = WorkloadSpec(tables=tuple(tables), row_changes=rows, rows_per_transaction=(1, 50),
                            rows_per_event=rows_per_event, null_ratio=0.0, pk_change_ratio=0.05, seed=seed)
        partial = path.with_suffix(f".{os.getpid()}.partial")  # two runs may generate it at once
        write_entries(partial, Workload(spec))
        partial.rename(path)
    row_changes, last = 0, None
    for last in read_entries(path):  # one pass: the files run to a GB
        row_changes += rows_in(last)
    assert last is not None, f"{path} is empty"
    return path, row_changes, EntryPosition.of(last)


@dataclass(frozen=True)
class DevServerProcess:
    """A dev server running in a process of its own."""

    port: int
    pid: int  # its CPU shares the machine with the daemon's and Spark's


@contextlib.contextmanager
def dev_server(path: Path, destination: str = "bench", *, capacity: int = 65536, repeat: int = 1,
               rate: float = 0, batch_mode: str = "ITEMSIZE", preload: bool = False) -> Iterator[DevServerProcess]:
    """A dev server process feeding ``path``; with ``preload``, every entry is in its store before it announces its
    port."""
    command = [sys.executable, "-m", "canalbridge", "--log-level", "warning", "devserver", "--port", "0",
               "--destination", destination, "--capacity", str(capacity), "--batch-mode", batch_mode,
               "--entries", str(path), "--repeat", str(repeat)]
    if rate:
        command += ["--rate", str(rate)]
    if preload:
        command.append("--preload")
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    try:
        line = server.stdout.readline() if server.stdout else ""
        match = re.search(r":(\d+) ", line)
        if match is None:
            raise SystemExit(f"the dev server did not start: {line!r}")
        yield DevServerProcess(int(match.group(1)), server.pid)
    finally:
        server.terminate()
        server.wait()


class LagRecorder:
    """Wraps a channel sink's writer; at each commit, records now minus each committed row's execute time.

    It times the sink's commits (each table's apply) and maintenance runs too; :attr:`sink` is the sink with
    both wrapped.
    """

    def __init__(self, sink: ChannelSink, lags: Counter, lock: threading.Lock) -> None:
        self.writer = sink.writer
        self.maintainer = sink.maintainer
        self.sink = dataclasses.replace(sink, writer=self, maintainer=self)
        self.lags = lags
        self.lock = lock
        self.staged: Counter = Counter()  # execute time (ms) -> rows
        self.held: list[Counter] = []  # what applies held back staged: recorded once they are published
        self.maintenance: list[tuple[float, MaintenanceReport]] = []  # (seconds, report) of each run
        self.applies: list[float] = []  # seconds of each commit of this table that landed

    def before_images(self) -> BeforeImages:
        return self.writer.before_images()

    def layout_note(self) -> str | None:
        return self.writer.layout_note()

    def begin(self) -> None:
        self.staged = Counter()
        self.writer.begin()

    def send(self, batch: RowBatch) -> None:
        self.staged.update(row.position.execute_time_ms for row in batch.rows)
        self.writer.send(batch)

    def decodes_row_changes(self) -> bool:
        return self.writer.decodes_row_changes()

    def send_raw(self, batch: RawBatch) -> None:
        run = batch.changes
        for execute_time_ms, rows in zip(run.execute_times, run.rows):
            self.staged[execute_time_ms] += max(rows, 1)
        self.writer.send_raw(batch)

    def seal(self) -> SealedTransaction:
        staged, self.staged = self.staged, Counter()
        return _Recorded(self, self.writer.seal(), staged)

    def record(self, staged: Counter) -> None:
        """Rows of a transaction just applied: their lag is now."""
        now_ms = int(time.time() * 1000)
        with self.lock:
            for execute_ms, rows in staged.items():
                self.lags[max(now_ms - execute_ms, 0)] += rows

    def abort(self, reason: str) -> None:
        self.staged = Counter()
        self.writer.abort(reason)

    def maintain(self, settings: MaintenanceSettings) -> MaintenanceReport:
        started = time.perf_counter()
        report = self.maintainer.maintain(settings)
        self.maintenance.append((time.perf_counter() - started, report))
        return report


class _Recorded:
    """A sealed transaction of a :class:`LagRecorder`: records its rows' lag once applied."""

    def __init__(self, recorder: LagRecorder, sealed: SealedTransaction, staged: Counter) -> None:
        self.recorder, self.sealed, self.staged = recorder, sealed, staged

    def apply(self, end_position: Position, label: str, *, publish: bool = True,
              behind: Position | None = None) -> None:
        started = time.perf_counter()
        try:
            self.sealed.apply(end_position, label, publish=publish, behind=behind)
        except BaseException:
            self.recorder.held.clear()  # the writer dropped what it held
            raise
        self.recorder.applies.append(time.perf_counter() - started)
        self.recorder.held.append(self.staged)
        if publish:  # the rows of the held parts became visible with this one
            for staged in self.recorder.held:
                self.recorder.record(staged)
            self.recorder.held.clear()

    def stage(self, end_position: Position, label: str, *, behind: Position | None = None) -> StagedWrite | None:
        """Staged for an atomic publish: timed as an apply, and its rows' lag taken now (a publish later)."""
        started = time.perf_counter()
        staged = self.sealed.stage(end_position, label, behind=behind)
        self.recorder.applies.append(time.perf_counter() - started)
        self.recorder.record(self.staged)
        return staged

    def discard(self, reason: str) -> None:
        self.sealed.discard(reason)


def drain(job: SyncJob, name: str, last: Position, committed: Counter, started: float,
          timeout_s: float = 3600.0, samples: list[tuple[float, int]] | None = None) -> float:
    """Wait until the job has acked ``last``, printing progress every 5 s; the peak RSS of this process, MB.

    ``committed`` counts the rows committed so far (values summed); ``started``
    is the job's start, from ``time.perf_counter``. ``samples`` (if given)
    gets (seconds since start, rows committed) twice a second.
    """
    peak_rss = 0.0
    last_report, rows_then = started, 0
    pace = threading.Event()  # never set: paces the progress poll
    while job.acks.position is None or job.acks.position < last:
        pace.wait(0.5)
        peak_rss = max(peak_rss, rss_mb())
        now = time.perf_counter()
        rows = sum(committed.values())
        if samples is not None:
            samples.append((now - started, rows))
        if job.fail_message is not None or now - started > timeout_s:
            raise SystemExit(f"{name}: not drained: {job.state} {job.fail_message}")
        if now - last_report >= 5.0:
            print(f"{name}: [{now - started:5.0f}s] {rows:,} row changes committed in {job.stats.commits} commits "
                  f"({(rows - rows_then) / (now - last_report):,.0f}/s), lag {lag_text(job)}, acked through "
                  f"{job.acks.position}, waiting for {last} | " + "  ".join(
                      f"{c.settings.target} {c.rows_written:,}" for c in job.channels), flush=True)
            last_report, rows_then = now, rows
    return peak_rss


@dataclass
class Drained:
    """A job that drained a workload from the dev server into Iceberg, and what it took."""

    job: SyncJob
    elapsed_s: float
    cpu_s: float  # this Python process's CPU time over the run
    jvm_cpu_s: float  # the Spark JVM's CPU time over the run
    source_cpu_s: float  # the dev server's
    peak_rss_mb: float
    lags: Counter  # lag (ms) -> rows committed with it
    recorders: dict[str, LagRecorder]  # by target
    peak_jvm_rss_mb: float  # the Spark JVM's
    cut_publishes: list[float] = dataclasses.field(default_factory=list)  # seconds of each cut published
    catalog_publishes: list[float] = dataclasses.field(default_factory=list)  # seconds of each atomic publish


class TimedPublisher:
    """A catalog publisher (atomic cuts) that records how long each publish took."""

    def __init__(self, inner: CatalogPublisher) -> None:
        self._inner = inner
        self.seconds: list[float] = []

    def publish(self, staged: Sequence[StagedWrite]) -> None:
        started = time.perf_counter()
        self._inner.publish(staged)
        self.seconds.append(time.perf_counter() - started)


class TimedCutLog:
    """A cut log that records how long each publish took."""

    def __init__(self, inner: CutLog) -> None:
        self._inner = inner
        self.seconds: list[float] = []

    def latest(self) -> PublishedCut | None:
        return self._inner.latest()

    def publish(self, cut: Cut) -> PublishedCut:
        started = time.perf_counter()
        published = self._inner.publish(cut)
        self.seconds.append(time.perf_counter() - started)
        return published


def drain_into_iceberg(name: str, path: Path, last: Position, tables: Sequence[TableDef],
                       spark_settings: SparkSettings, commit: CommitSettings, *, rate: float = 0,
                       maintenance: MaintenanceSettings | None = None, samples: list[tuple[float, int]] | None = None,
                       timeout_s: float = 3600.0, preload: bool = False, batch_size: int = 4096,
                       cuts: CutSettings | None = None, catalog: str | None = None,
                       publisher: CatalogPublisher | None = None) -> Drained:
    """One job, named ``name``, from a dev server feeding ``path`` (at ``rate`` row changes/s, or all
    at once) into fresh tables ``CATALOG.NAME.*`` (``catalog``, or the settings' catalog), until ``last`` is
    acked; then paused. ``publisher``: every commit is published atomically through it (``[job.cuts] atomic``).

    The dev server's store is the commit settings' (capacity and batch mode); ``preload`` has it read the whole
    file into the store before the job starts (:func:`dev_server`). ``batch_size`` is a get's (entries, or KB in
    ``MEMSIZE`` mode). ``cuts``: publish consistent cuts into ``CATALOG.NAME.cut_log`` (none without it)."""
    spark = get_spark(spark_settings)
    lags: Counter = Counter()
    lock = threading.Lock()
    recorders: dict[str, LagRecorder] = {}

    def sink(channel: ChannelSettings) -> ChannelSink:
        recorder = recorders[channel.target] = LagRecorder(make_sink(spark, channel, name, spark_settings), lags, lock)
        return recorder.sink

    with dev_server(path, capacity=commit.store_capacity, rate=rate, batch_mode=commit.store_batch_mode,
                    preload=preload) as source:
        canal = CanalSettings("127.0.0.1", source.port, "bench", batch_size=batch_size, poll_timeout_ms=100)
        catalog = catalog or spark_settings.catalog
        channels = tuple(ChannelSettings(t.qualified, f"{catalog}.{name}.{t.name}") for t in tables)
        settings = JobSettings(name, canal, channels, commit, maintenance or MaintenanceSettings(),
                               cuts=cuts or CutSettings(enabled=False, atomic=publisher is not None))
        cut_log = None if cuts is None else TimedCutLog(
            IcebergCutLog(lambda: spark, name, cuts, f"{catalog}.{name}.cut_log"))
        timed = None if publisher is None else TimedPublisher(publisher)
        job = SyncJob(settings, sink, cut_log=cut_log, publisher=timed)
        jvm = spark_pid(spark)
        started, cpu_started, jvm_started = time.perf_counter(), time.process_time(), cpu_seconds(jvm)
        source_started = cpu_seconds(source.pid)
        job.start()
        with RssPeaks({"spark_jvm": jvm}) as peaks:
            peak_rss = drain(job, name, last, lags, started, timeout_s, samples)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        jvm_cpu, source_cpu = cpu_seconds(jvm) - jvm_started, cpu_seconds(source.pid) - source_started
        if cuts is not None:  # (the last cut published before the job pauses, or the count would race the pause)
            deadline = time.monotonic() + timeout_s
            while ((cut := job.record().cut) is None or cut.position != str(last)) and time.monotonic() < deadline:
                time.sleep(0.1)
        job.pause()
    return Drained(job, elapsed, cpu, jvm_cpu, source_cpu, peak_rss, lags, recorders, peaks.mb["spark_jvm"],
                   cut_log.seconds if cut_log is not None else [], timed.seconds if timed is not None else [])


def run_result(name: str, rows: int, elapsed: float, job: SyncJob, committed: Counter, peak_rss: float,
               rate: float = 0, *, cpu_s: float, jvm_cpu_s: float | None = None,
               source_cpu_s: float | None = None) -> dict[str, object]:
    """The figures of one benchmark run; ``committed`` maps each row's lag (ms) to how many rows had it.

    ``cpu_s`` is this Python process's CPU time over the run (``time.process_time``:
    every thread, not the Spark JVM, the dev server or the SQL writer, which are
    processes of their own); it includes the benchmark's own per-row counting.
    ``jvm_cpu_s``, when given, is the Spark JVM's (both cores' worth), and
    ``source_cpu_s`` the dev server's: on one machine the three share its cores.
    """
    result: dict[str, object] = {
        "run": name, "rows": rows, "seconds": round(elapsed, 1), "rows_per_s": round(rows / elapsed),
        "commits": job.stats.commits, "rows_committed": sum(committed.values()), "peak_python_rss_mb": round(peak_rss),
        "python_cpu_us_per_row": round(cpu_s / rows * 1e6, 2)}
    if jvm_cpu_s is not None:
        result["jvm_cpu_us_per_row"] = round(jvm_cpu_s / rows * 1e6, 2)
    if source_cpu_s is not None:
        result["devserver_cpu_us_per_row"] = round(source_cpu_s / rows * 1e6, 2)
    if rate:
        result["rate"] = round(rate)
    result["lag_p50_s"] = round(percentile(committed, 0.50) / 1000, 2)
    result["lag_p99_s"] = round(percentile(committed, 0.99) / 1000, 2)
    return result


def in_child(name: str, function: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``function(*args)`` in a process of its own, with a Spark driver JVM of its own (started cold, as a
    daemon's is); its result. The process dies with this one."""
    context = multiprocessing.get_context("spawn")  # never fork a process that runs a JVM bridge
    results: multiprocessing.Queue = context.Queue()
    process = context.Process(target=_child, args=(function, args, results), name=f"bench-{name}")
    process.start()
    try:
        while True:  # (bounded: a run gives up after drain()'s own timeout, and its process ends)
            try:
                return results.get(timeout=5.0)
            except queue.Empty:
                if not process.is_alive():
                    try:  # (put just before it ended)
                        return results.get(timeout=1.0)
                    except queue.Empty:
                        raise SystemExit(f"the {name} run ended without a result (exit code {process.exitcode})") \
                            from None
    finally:
        process.join(60)
        if process.is_alive():
            process.kill()
            process.join()


def _child(function: Callable[..., dict[str, Any]], args: tuple[Any, ...], results: multiprocessing.Queue) -> None:
    die_with_parent()  # a benchmark cut short leaves no driver behind
    configure_logging("warning")
    try:
        results.put(function(*args))
    finally:
        stop_spark()


def spark_pid(spark: SparkSession) -> int:
    """The process id of a local SparkSession's JVM."""
    gateway = spark.sparkContext._gateway
    assert gateway is not None and gateway.proc is not None, "a SparkSession without a JVM of its own"
    return int(gateway.proc.pid)


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process, all its threads, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sampling:
    """Over a ``with`` block, :meth:`note` twice a second on a thread of its own, and once more at the end."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.note()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            self.note()

    def note(self) -> None:
        """Take one sample."""
        raise NotImplementedError


class RssPeaks(Sampling):
    """The peak RSS (MB) of other processes over a ``with`` block: ``peaks.mb[name]``."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__("rss-peaks")
        self._pids = dict(pids)
        self.mb = {name: 0.0 for name in pids}

    def note(self) -> None:
        for name, pid in self._pids.items():
            with contextlib.suppress(OSError):  # (a process that ended keeps its peak)
                self.mb[name] = max(self.mb[name], round(rss_mb(pid)))


def percentile(counts: Counter, share: float) -> float:
    """The value below which ``share`` of the counted items fall (``counts``: value -> how many)."""
    total = sum(counts.values())
    if not total:
        return float("nan")
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= share * total:
            return value
    return max(counts)


def make_rows(start_key: int, count: int, offset: int) -> list[ChangeRow]:
    """``count`` inserts of a 10-column bench table, keys from ``start_key``."""
    position = EntryPosition("mysql-bin.000001", offset)
    return [ChangeRow(ChangeKind.INSERT, bench_row(start_key + n, n), position) for n in range(count)]


def bench_row(key: int, n: int) -> tuple[str, ...]:
    """The values of a 10-column bench table's row (``narrow_table``), as MySQL text."""
    return (str(key), str(key % 1000), f"name-{key}", f"{key % 100000}.25", "2024-05-06 07:08:09.123",
            str(key * 7), str(n), f"v{n}", "1.50", "2025-01-01 00:00:00.000")
