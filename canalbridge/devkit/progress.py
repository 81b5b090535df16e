"""Progress a person can read, and a quick end, for the commands that run a daemon for minutes (the demos).

:class:`DaemonThread` runs a :class:`~canalbridge.daemon.service.Daemon` in a thread
and keeps what ended it. :class:`RunWatch` waits for a goal while it prints,
every few seconds, rows committed per table, the rate and the lag; it gives
up as soon as the daemon stopped, the job paused or was cancelled, or a
service the run needs is gone, and says which and why. On a terminal the
figures are a live table (rich); otherwise plain lines, so a log stays
readable.
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from canalbridge.sync.model.position import EntryPosition

if TYPE_CHECKING:
    from canalbridge.daemon.service import Daemon
    from canalbridge.sync.job.job import SyncJob

# A check of something the run needs besides the daemon (a server process): why it is gone, or None.
Check = Callable[[], str | None]


class DaemonThread:
    """The daemon's ``run`` in a thread; :attr:`error` is what ended it early, if anything did."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.error: BaseException | None = None
        self.exit_status: int | None = None
        # A daemon thread: a run that will not stop (a commit hanging in Spark) must not keep the demo alive.
        self._thread = threading.Thread(target=self._run, name="demo-daemon", daemon=True)

    def _run(self) -> None:
        try:
            self.exit_status = self.daemon.run(install_signals=False)
        except BaseException as exc:  # reported by the watch, which names it
            self.error = exc

    def start(self) -> DaemonThread:
        """Start the daemon's run; returns self."""
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        """Whether the daemon still runs."""
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 120.0) -> bool:
        """Ask the daemon to stop and wait for it (its own stop is bounded by stop_timeout_seconds); whether it did."""
        self.daemon.stop_requested.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            print(f"the daemon did not stop within {timeout_s:.0f} s; leaving it behind", file=sys.stderr)
        return not self._thread.is_alive()


def acked_through(runner: DaemonThread, job: str, last: EntryPosition) -> bool:
    """Whether ``job`` has acked Canal through ``last`` (so every entry up to it is committed)."""
    found = runner.daemon.jobs.get(job)
    acked = found.acks.position if found is not None else None
    return isinstance(acked, EntryPosition) and acked >= last


def lag_text(job: SyncJob) -> str:
    """How far the job is behind its source: now minus the execute time of its ack position ("-" before one)."""
    ack = job.acks.position
    return f"{max(time.time() - ack.execute_time_ms / 1000, 0):.1f}s" if ack and ack.execute_time_ms else "-"


@dataclass(frozen=True)
class Outcome:
    """How a watch ended: ``reached`` the goal, or not, and then ``reason``."""

    reached: bool
    reason: str = ""


class RunWatch:
    """Waits for ``goal`` on one job of a daemon, printing its progress, failing fast with the cause."""

    def __init__(self, runner: DaemonThread, job: str, *, checks: tuple[Check, ...] = (), every_s: float = 5.0,
                 out: TextIO | None = None) -> None:
        self.runner = runner
        self.job = job
        self.checks = checks
        self.every_s = every_s
        self.console = Console(file=out, highlight=False)
        self._started = time.monotonic()
        self._last: tuple[float, int] = (self._started, 0)
        self._rate = 0.0

    def wait(self, goal: Callable[[], bool], timeout_s: float) -> Outcome:
        """Poll every half second until ``goal()`` holds, something that ends the run is seen, or the timeout."""
        deadline = time.monotonic() + timeout_s
        tick = threading.Event()  # never set: paces the polling, which has nothing to wait on
        if self.console.is_terminal:
            with Live(self._table(), console=self.console, refresh_per_second=2, transient=False) as live:
                while (outcome := self._poll(goal, deadline)) is None:
                    live.update(self._table())
                    tick.wait(0.5)
                live.update(self._table())
                return outcome
        printed = 0.0
        while (outcome := self._poll(goal, deadline)) is None:
            if time.monotonic() - printed >= self.every_s:
                self.console.print(self.line(), soft_wrap=True)
                printed = time.monotonic()
            tick.wait(0.5)
        self.console.print(self.line(), soft_wrap=True)
        return outcome

    # -- what ends a run --------------------------------------------------------------------------

    def _poll(self, goal: Callable[[], bool], deadline: float) -> Outcome | None:
        if goal():
            return Outcome(True)
        if not self.runner.alive:
            error = self.runner.error
            cause = f"{type(error).__name__}: {error}" if error else f"exit status {self.runner.exit_status}"
            return Outcome(False, f"the daemon stopped: {cause}")
        for check in self.checks:
            if (gone := check()) is not None:
                return Outcome(False, gone)
        job = self._job()
        if job is not None and job.state.value in ("PAUSED", "CANCELLED"):
            return Outcome(False, f"job {self.job} is {job.state.value}: {job.fail_message or 'no reason given'}")
        if time.monotonic() >= deadline:
            return Outcome(False, f"not done after {deadline - self._started:.0f} s")
        return None

    def _job(self) -> SyncJob | None:
        return self.runner.daemon.jobs.get(self.job)

    # -- what is shown ----------------------------------------------------------------------------

    def _figures(self) -> tuple[str, dict[str, int], float, str, str]:
        """The job's state, rows committed per target, the rate (rows/s), the lag and the ack position."""
        job = self._job()
        if job is None:
            return "starting (Spark, the Iceberg tables)", {}, 0.0, "-", "nothing"
        committed: dict[str, int] = {}
        for channel in job.channels:  # shards merged into one target are one line
            committed[channel.settings.target] = committed.get(channel.settings.target, 0) + channel.rows_written
        total = sum(committed.values())
        now = time.monotonic()
        since, before = self._last
        if now - since >= 1.0:
            self._rate = (total - before) / (now - since)
            self._last = (now, total)
        ack = job.acks.position
        acked = f"{ack.journal}:{ack.offset}" if ack else "nothing"
        return job.state.value, committed, self._rate, lag_text(job), acked

    def line(self) -> str:
        """One plain line: elapsed time, state, rows committed (per table), rate and lag."""
        state, committed, rate, lag, acked = self._figures()
        elapsed = time.monotonic() - self._started
        tables = "  ".join(f"{target} {rows:,}" for target, rows in sorted(committed.items()))
        return (f"[{elapsed:5.0f}s] {state}  committed {sum(committed.values()):,} rows ({rate:,.0f}/s)  "
                f"lag {lag}  acked through {acked}" + (f"  | {tables}" if tables else ""))

    def _table(self) -> Table:
        state, committed, rate, lag, acked = self._figures()
        elapsed = time.monotonic() - self._started
        table = Table(title=f"job {self.job}: {state}, {elapsed:.0f} s, {rate:,.0f} rows/s, lag {lag}, "
                            f"acked through {acked}",
                      title_justify="left")
        table.add_column("target")
        table.add_column("rows committed", justify="right")
        for target, rows in sorted(committed.items()):
            table.add_row(target, f"{rows:,}")
        return table


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """For ``preexec_fn``: the child gets SIGTERM when the process that started it dies.

    A test run killed outright (or a script cut short) then leaves no
    mariadbd or Canal behind. Linux only; elsewhere a no-op. Linux sends it
    when the *thread* that started the child ends: start services from a
    thread that lives as long as they should (pytest's main thread does).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
