"""Small helpers shared by the test packages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def eventually(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``predicate`` every 50 ms until it holds or ``timeout_s`` passes.

    For state that has no event to wait on (a lock another process-internal
    thread holds, a counter in a job); never a stand-in for a fixed sleep.
    """
    deadline = time.monotonic() + timeout_s
    tick = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            return predicate()
        tick.wait(0.05)
    return True
