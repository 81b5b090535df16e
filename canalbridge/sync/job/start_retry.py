"""Starting a job again after an outage, with back-off, until it runs or a person steps in.

A job that could not start (a catalog, object store or source that did
not answer), or whose source stayed away for all its reconnect attempts,
is paused with a :attr:`FailKind.OUTAGE` message and started again after
``retry_initial_seconds``, doubling up to ``retry_max_seconds``, as Kafka
Connect restarts a failed task. A user's pause, resume, reset or cancel
ends the retries; so does a start that works.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from canalbridge.sync.model.record import StartRetryStatus
from canalbridge.sync.settings import RetrySettings

log = structlog.get_logger("canalbridge.job")

JOIN_TIMEOUT_S = 10.0  # the thread only waits and calls back: it ends at once when told


class StartRetry:
    """One job's retries of its start: one thread, which waits for the next try and then calls ``attempt``.

    ``attempt`` runs on the retry's thread, with none of its locks held; it
    calls :meth:`schedule` again when the start fails.
    """

    def __init__(self, job: str, policy: RetrySettings, attempt: Callable[[], None], *, enabled: bool = True) -> None:
        """Disabled, :meth:`schedule` schedules nothing (a job run without a daemon: its caller decides)."""
        self._policy = policy
        self._enabled = enabled
        self._attempt = attempt
        self._cond = threading.Condition()
        self._attempts = 0
        self._due: float | None = None  # monotonic time of the next try; None: none is scheduled
        self._due_ms: int | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._name = f"start-retry-{job}"
        self._log = log.bind(job=job)

    def schedule(self, reason: str) -> float | None:
        """Count a failed start and schedule the next; returns the wait in seconds (None: nothing scheduled)."""
        with self._cond:
            if self._closed or not self._enabled:
                return None
            self._attempts += 1
            wait = min(self._policy.initial_seconds * 2 ** (self._attempts - 1), self._policy.max_seconds)
            self._due = time.monotonic() + wait
            self._due_ms = int((time.time() + wait) * 1000)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        self._log.warning("job.start_retry_scheduled", attempts=self._attempts, wait_s=round(wait, 3), reason=reason)
        return wait

    def cancel(self) -> None:
        """No further try, and the count starts over (a user acted, or the job runs)."""
        with self._cond:
            self._attempts = 0
            self._due = self._due_ms = None
            self._cond.notify_all()

    def close(self) -> None:
        """Cancel, and end the thread (at daemon shutdown)."""
        with self._cond:
            self._closed = True
            self._due = self._due_ms = None
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT_S)

    def status(self) -> StartRetryStatus | None:
        """The retries so far and the next one, while one is scheduled."""
        with self._cond:
            if self._due_ms is None:
                return None
            return StartRetryStatus(self._attempts, self._due_ms)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._due is None or time.monotonic() < self._due):
                    self._cond.wait(None if self._due is None else max(self._due - time.monotonic(), 0.0))
                if self._closed:
                    return
                self._due = self._due_ms = None
            try:
                self._attempt()
            except Exception as exc:  # (the job reports its own start failures; this is a bug's last net)
                self._log.error("job.start_retry_failed", error=str(exc))
