"""A named thread with a bounded join, the shape every worker of the sync core shares; and one a user may
cancel (a snapshot, a verify)."""

from __future__ import annotations

import threading

# How often a worker blocked on another thread (a queue, a future, a window, room in the hand-off) looks again
# at the job's stop: the bound on how long a stop waits for it.
STOP_CHECK_S = 0.2


class Worker:
    """Runs :meth:`_run` in a daemon thread; the job sets ``stop`` and joins with a bound."""

    def __init__(self, name: str, stop: threading.Event) -> None:
        self.name = name
        self._stop = stop
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the thread; False if it is still running."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        if thread.is_alive():
            return False
        self._thread = None
        return True

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        raise NotImplementedError


class CancellableWorker(Worker):
    """A worker a user may cancel before it is done (a snapshot, a verify): it reads no more once cancelled or
    stopped; what a cancel leaves behind, each says."""

    def __init__(self, name: str, stop: threading.Event) -> None:
        super().__init__(name, stop)
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Do no more; the thread ends once what is in flight allows (see the class)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        """Whether a cancel was asked for."""
        return self._cancelled.is_set()

    @property
    def running(self) -> bool:
        """Whether there is still something to cancel."""
        return self.alive

    def _halted(self) -> bool:
        """Whether to read no more: a cancel, or the job stops."""
        return self._stop.is_set() or self._cancelled.is_set()
