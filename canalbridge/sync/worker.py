"""A named thread with a bounded join, the shape every worker of the sync core shares."""

from __future__ import annotations

import threading


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
