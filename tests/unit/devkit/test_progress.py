"""The demos' watch: it ends as soon as the daemon, the job or a service it needs is gone, and says why."""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace

from canalbridge.devkit.progress import DaemonThread, RunWatch
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.record import FailKind, FailMessage, JobState


class FakeDaemon:
    """Runs until stopped, or raises ``error`` at start as a daemon whose Spark cannot start does."""

    def __init__(self, jobs: dict, error: Exception | None = None) -> None:
        self.jobs = jobs
        self.error = error
        self.stop_requested = threading.Event()

    def run(self, install_signals: bool = True) -> int:
        if self.error is not None:
            raise self.error
        self.stop_requested.wait(60)
        return 0


@dataclass
class FakeJob:
    state: JobState = JobState.RUNNING
    fail_message: FailMessage | None = None
    channels: list = field(default_factory=list)
    acks: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(position=None))


def channel(target: str, rows: int) -> SimpleNamespace:
    return SimpleNamespace(settings=SimpleNamespace(target=target), rows_written=rows)


def watch(daemon: FakeDaemon, **kwargs) -> tuple[RunWatch, DaemonThread, io.StringIO]:
    out = io.StringIO()  # not a terminal: plain lines
    runner = DaemonThread(daemon).start()  # type: ignore[arg-type]
    return RunWatch(runner, "demo", out=out, every_s=0.1, **kwargs), runner, out


def test_a_daemon_that_cannot_start_ends_the_watch_with_its_error():
    run, _, _ = watch(FakeDaemon({}, RuntimeError("the Iceberg Spark runtime is not in .cache/iceberg")))
    outcome = run.wait(lambda: False, timeout_s=30)
    assert not outcome.reached
    assert outcome.reason == "the daemon stopped: RuntimeError: the Iceberg Spark runtime is not in .cache/iceberg"


def test_a_paused_job_ends_the_watch_with_its_reason():
    job = FakeJob(JobState.PAUSED, FailMessage(FailKind.RUN_FAIL, "lake.demo.t: commit failed at mysql-bin.000001:4"))
    run, runner, _ = watch(FakeDaemon({"demo": job}))
    try:
        outcome = run.wait(lambda: False, timeout_s=30)
    finally:
        runner.stop()
    assert outcome.reason == "job demo is PAUSED: RUN_FAIL: lake.demo.t: commit failed at mysql-bin.000001:4"


def test_a_service_that_is_gone_ends_the_watch_by_name():
    run, runner, _ = watch(FakeDaemon({"demo": FakeJob()}), checks=(lambda: "the dev server (pid 7) exited",))
    try:
        assert run.wait(lambda: False, timeout_s=30).reason == "the dev server (pid 7) exited"
    finally:
        runner.stop()


def test_progress_lines_give_rows_per_target_the_rate_lag_and_ack_position():
    shards = [channel("lake.demo.a", 1000), channel("lake.demo.a", 200)]  # two tables merged into one target
    job = FakeJob(channels=[*shards, channel("lake.demo.b", 34)])
    job.acks.position = EntryPosition("mysql-bin.000002", 4521, 0)
    run, runner, out = watch(FakeDaemon({"demo": job}))
    done = threading.Event()
    try:
        threading.Timer(0.6, done.set).start()
        assert run.wait(done.is_set, timeout_s=30).reached
    finally:
        runner.stop()
    line = out.getvalue().splitlines()[-1]
    assert "RUNNING  committed 1,234 rows" in line
    assert "lag -  acked through mysql-bin.000002:4521  | lake.demo.a 1,200  lake.demo.b 34" in line
