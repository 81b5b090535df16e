"""``canalbridge run``: the daemon that runs every configured job until SIGTERM/SIGINT."""

from __future__ import annotations

import fcntl
import functools
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import structlog

from canalbridge.daemon.config import Config
from canalbridge.daemon.control import ControlServer
from canalbridge.daemon.control_access import daemon_endpoint
from canalbridge.daemon.exit_codes import STUCK
from canalbridge.daemon.metrics import Metrics
from canalbridge.daemon.state import StateStore, StoredFilters
from canalbridge.daemon.status import job_json
from canalbridge.sync.channel.sink import CatalogPublisher
from canalbridge.sync.errors import JobStateError
from canalbridge.sync.job.cuts import CutLog
from canalbridge.sync.job.job import FailKind, JobState, SyncJob
from canalbridge.sync.model.record import ChannelRecord
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.snapshot.source import SnapshotSource

log = structlog.get_logger("canalbridge.daemon.service")
LOCK_FILE = "canalbridge.lock"
# Exit status when threads did not stop within their bound (a commit hanging in a target):
# whether that commit landed is read back at the next start, but a supervisor should know.


class DaemonError(Exception):
    """The daemon cannot start (another one holds the state directory, Spark cannot start...)."""


class StateDirLock:
    """An exclusive lock on the state directory, with the holder's pid in the file."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILE
        self._file: Any = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+")
        except OSError as exc:
            raise DaemonError(f"cannot use state directory {self.path.parent}: {exc}") from exc
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise DaemonError(
                f"another canalbridge daemon (pid {holder}) already uses state directory {self.path.parent}"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Daemon:
    """Owns the jobs, the state store, the control endpoint and the metrics."""

    def __init__(self, config: Config, stop_requested: threading.Event | None = None) -> None:
        self.config = config
        self.stop_requested = stop_requested or threading.Event()
        self.jobs: dict[str, SyncJob] = {}
        self._lock = StateDirLock(config.daemon.state_dir)
        self._store: StateStore | None = None
        self._metrics: Metrics | None = None
        self._control: ControlServer | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def run(self, install_signals: bool = True) -> int:
        """Run until a stop is requested; return the exit status (:data:`STUCK` if threads hung)."""
        if install_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: self.stop_requested.set())
        self._lock.acquire()
        try:
            if not self.stop_requested.is_set():
                self._start()
            control = self._control.endpoint.describe() if self._control is not None else None
            log.info("daemon.started", jobs=sorted(self.jobs), control=control, pid=os.getpid())
            while not self.stop_requested.wait(1.0):  # a bounded wait, so signals are seen promptly
                pass
            log.info("daemon.stopping")
        finally:
            stuck = self._shutdown()
            self._lock.release()
        if stuck:
            log.error("daemon.stopped_with_stuck_threads", stuck=stuck)
            return STUCK
        log.info("daemon.stopped")
        return 0

    def _start(self) -> None:
        from spark_sink.session import get_spark

        self._store = StateStore(self.config.daemon.state_dir)
        control = daemon_endpoint(self.config.daemon)  # (a socket path too long, a bad token file: before Spark)
        records = self._store.load_jobs()
        self._metrics = Metrics(lambda: list(self.jobs.values()))
        get_spark(self.config.spark)  # start Spark before any job, so that a setup error stops the daemon
        for settings in self.config.jobs:
            job = SyncJob(settings, self._sink_factory(settings), self._on_job_change,
                          snapshot=self._snapshot_source(settings), retry_starts=True,
                          cut_log=self._cut_log(settings), publisher=self._publisher(settings))
            self.jobs[settings.name] = job
            record = records.get(settings.name)
            if record is not None:
                job.restore(record)
        if self.config.daemon.metrics_port:
            self._metrics.serve(self.config.daemon.metrics_host, self.config.daemon.metrics_port)
        starting = [job for job in self.jobs.values() if starts_with_daemon(job)]
        for job in self.jobs.values():
            if job not in starting:
                # Saved before the control endpoint listens: a reset it takes must not be written over.
                log.info("daemon.job_not_started", job=job.name, state=job.state.value)
                self._save(job, transition=False)
        self._control = ControlServer(control, self.status, self.act, tuple(ACTIONS))
        self._control.start()
        for job in starting:
            self._start_job(job)

    def _start_job(self, job: SyncJob) -> None:
        try:
            job.start()
        except Exception as exc:  # the job is paused and says why (and tries again if it may pass); others go on
            log.error("daemon.job_cannot_start", job=job.name, error=str(exc))

    def _sink_factory(self, settings: JobSettings):  # type: ignore[no-untyped-def]
        from spark_sink.session import get_spark
        from spark_sink.sink import make_sink

        def factory(channel: ChannelSettings):  # type: ignore[no-untyped-def]
            # get_spark() each time: the session in use may have replaced one whose JVM died.
            return make_sink(get_spark(self.config.spark), channel, settings.name, self.config.spark)

        return factory

    def _cut_log(self, settings: JobSettings) -> CutLog | None:
        """Where the job's consistent cuts are tagged and logged (``[job.cuts]``), unless they are off."""
        from spark_sink.cuts import IcebergCutLog, default_log_table
        from spark_sink.session import get_spark

        cuts = settings.cuts
        table = cuts.table or default_log_table(settings.channels[0].target)
        if not cuts.enabled or table is None:  # (None: a malformed target, which its channel names when it opens)
            return None
        return IcebergCutLog(functools.partial(get_spark, self.config.spark), settings.name, cuts, table)

    def _publisher(self, settings: JobSettings) -> CatalogPublisher | None:
        """The catalog commit of a job whose cuts are atomic (``[job.cuts] atomic``); a catalog that has none
        stops the daemon at start, naming it."""
        from spark_sink.catalog_commit import IcebergPublisher, unsupported
        from spark_sink.errors import SparkSetupError
        from spark_sink.session import get_spark

        if not settings.cuts.atomic:
            return None
        catalog = settings.channels[0].target.split(".", 1)[0]
        reason = unsupported(get_spark(self.config.spark), catalog)
        if reason is not None:
            raise SparkSetupError(f"job {settings.name}: [job.cuts] atomic needs a catalog that commits several "
                                  f"tables at once, and catalog {catalog} cannot: {reason}")
        return IcebergPublisher(functools.partial(get_spark, self.config.spark),
                                settings.commit.commit_timeout_seconds)

    def _snapshot_source(self, settings: JobSettings) -> SnapshotSource | None:
        """Where the job's snapshot and verify read, if it has one: its source database, and chunks through
        Spark, compared with the targets through Spark; the progress of a rule's tables read from their targets."""
        from spark_sink.chunk_read import JdbcSource, SparkChunkReader
        from spark_sink.session import get_spark
        from spark_sink.snapshot_progress import SparkProgressReader
        from spark_sink.verify import SparkComparer

        snapshot = settings.snapshot
        if snapshot is None:
            return None
        spark = functools.partial(get_spark, self.config.spark)
        assert self._store is not None  # (opened before any job is made)
        return SnapshotSource(snapshot.connect, SparkChunkReader(spark, JdbcSource.of(snapshot)),
                              SparkComparer(spark), SparkProgressReader(spark, settings.name),
                              StoredFilters(self._store))

    def _shutdown(self) -> dict[str, list[str]]:
        """Stop everything; the threads, per job, that did not stop within the bound."""
        # All jobs at once, so that the daemon stops within one job's stop_timeout_seconds.
        with ThreadPoolExecutor(max_workers=max(len(self.jobs), 1), thread_name_prefix="shutdown") as pool:
            left = dict(zip(self.jobs, pool.map(SyncJob.shutdown, self.jobs.values())))
        stuck = {name: list(threads) for name, threads in left.items() if threads}
        if self._control is not None:
            self._control.stop()
        if self._metrics is not None:
            self._metrics.stop()
        if not stuck:
            # With a commit still running, stopping Spark could wait on it; the JVM
            # ends with this process instead.
            from spark_sink.session import stop_spark

            stop_spark()
        if self._store is not None:
            self._store.close()
        return stuck

    # -- job events, status and control ------------------------------------------------------------

    def _on_job_change(self, job: SyncJob, transition: bool) -> None:
        self._save(job, transition=transition)
        if not transition and self._metrics is not None:
            self._metrics.observe_commit(job)

    def _save(self, job: SyncJob, *, transition: bool) -> None:
        if self._store is not None:
            self._store.save_job(job.record(), transition=transition)

    def status(self) -> dict[str, Any]:
        return {"live": True, "pid": os.getpid(),
                "jobs": [job_json(job.record(), job.settings) for job in self.jobs.values()]}

    def act(self, name: str, action: str, params: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        """Do ``action`` (one of :data:`ACTIONS`) to job ``name``; ``params``: a reset's ``channel``s, a
        snapshot's ``table``s and ``where``, a verify's ``table``s. Returns the job's status (and a snapshot's
        or verify's ``tables``)."""
        job = self.jobs.get(name)
        if job is None:
            raise KeyError(f"no job named {name!r}")
        spec = ACTIONS.get(action)
        if spec is None:
            raise JobStateError(f"unknown action {action!r}")
        params = params or {}
        unexpected = sorted(set(params) - spec.params)
        if unexpected:
            raise JobStateError(f"{action} takes no {', '.join(unexpected)}")
        told = spec.run(self, job, params)
        return {**job_json(job.record(), job.settings), **told}

    def forget_positions(self, name: str, reset: tuple[ChannelRecord, ...]) -> None:
        """A reset's channels no longer hold a position in the state store (the job's saves keep them)."""
        if self._store is not None:
            self._store.forget_positions(name, [c.source for c in reset])


def starts_with_daemon(job: SyncJob) -> bool:
    """Whether the daemon starts ``job``: new, running when the daemon stopped, paused by an outage (its
    retries go on), or FINISHED by a snapshot in ``mode = "only"`` whose config now says to stream on."""
    if job.state is JobState.FINISHED:
        return not job.snapshot_only
    if job.state is JobState.PAUSED:  # by an outage, which the daemon retries: the next start is a try
        return job.fail_message is not None and job.fail_message.kind is FailKind.OUTAGE
    return job.state in (JobState.PENDING, JobState.RUNNING)


# -- the actions a person takes through the control endpoint ---------------------------------------------------

Params = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class JobAction:
    """One action on a job: the parameters its request may carry, and what it does; what it returns is added
    to the job's status in the reply."""

    params: frozenset[str]
    run: Callable[[Daemon, SyncJob, Params], Mapping[str, Any]]


def _snapshot(daemon: Daemon, job: SyncJob, params: Params) -> Mapping[str, Any]:
    wheres = params.get("where", ())
    if len(wheres) > 1:
        raise JobStateError("a snapshot takes one where")
    shown = job.on_demand.snapshot(tuple(params.get("table", ())), wheres[0] if wheres else None)
    return {"tables": list(shown), "snapshot_channels": list(shown.values())}


def _verify(daemon: Daemon, job: SyncJob, params: Params) -> Mapping[str, Any]:
    verify_id, tables = job.on_demand.verify(tuple(params.get("table", ())))
    return {"tables": list(tables), "verify_id": verify_id}


def _cancel(what: Literal["snapshot", "verify"]) -> Callable[[Daemon, SyncJob, Params], Mapping[str, Any]]:
    def cancel(daemon: Daemon, job: SyncJob, params: Params) -> Mapping[str, Any]:
        return {"tables": list(job.on_demand.cancel(what))}
    return cancel


def _reset(daemon: Daemon, job: SyncJob, params: Params) -> Mapping[str, Any]:
    job.reset(tuple(params.get("channel", ())), functools.partial(daemon.forget_positions, job.name))
    return {}


def _rebuild(daemon: Daemon, job: SyncJob, params: Params) -> Mapping[str, Any]:
    tables = params.get("table", ())
    if len(tables) != 1:
        raise JobStateError("a rebuild takes one table")
    channel = job.rebuild(tables[0], functools.partial(daemon.forget_positions, job.name))
    return {"tables": [channel.source], "target": channel.target}


def _step_only(step: Callable[[SyncJob], None]) -> Callable[[Daemon, SyncJob, Params], Mapping[str, Any]]:
    def run(daemon: Daemon, job: SyncJob, params: Params) -> Mapping[str, Any]:
        step(job)
        return {}
    return run


# Every action the control endpoint serves (POST /jobs/<name>/<action>), stated once.
ACTIONS: dict[str, JobAction] = {
    "pause": JobAction(frozenset(), _step_only(SyncJob.pause)),
    "resume": JobAction(frozenset(), _step_only(SyncJob.resume)),
    "stop": JobAction(frozenset(), _step_only(lambda job: job.cancel("stopped by user", FailKind.USER_CANCEL))),
    "reset": JobAction(frozenset({"channel"}), _reset),
    "rebuild": JobAction(frozenset({"table"}), _rebuild),
    "snapshot": JobAction(frozenset({"table", "where"}), _snapshot),
    "cancel-snapshot": JobAction(frozenset(), _cancel("snapshot")),
    "verify": JobAction(frozenset({"table"}), _verify),
    "cancel-verify": JobAction(frozenset(), _cancel("verify")),
}
