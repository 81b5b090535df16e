"""The bounded hand-off from the Receiver to the Consumer, and its rollback epoch.

Every rollback of Canal's get cursor (by the Consumer after a failed
commit, or by the Receiver after a reconnect) empties the queue and moves
to a new *epoch*. A batch carries the epoch it was taken in, so the
Consumer can tell that what it holds was rolled back on the server.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass

from canalbridge.canal import CanalBatch


@dataclass(frozen=True)
class QueuedBatch:
    epoch: int
    batch: CanalBatch


class BatchQueue:
    """A bounded FIFO of batches with the two locks that keep rollbacks consistent.

    ``get_lock`` is held by the Receiver across a get and the enqueue of its
    result, and by whoever rolls Canal back, so no batch taken before a
    rollback is enqueued after it. ``epoch_lock`` is held while the epoch
    changes and while the Consumer acks, so acks never name batches of an
    epoch that was rolled back.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.get_lock = threading.Lock()
        self.epoch_lock = threading.Lock()
        self._epoch = 0
        self._items: collections.deque[QueuedBatch] = collections.deque()
        self._changed = threading.Condition()
        self._interrupted = False

    @property
    def epoch(self) -> int:
        return self._epoch

    def wait_for_room(self, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self._items) < self.capacity, timeout_s)

    def put(self, batch: CanalBatch) -> None:
        """Enqueue under the current epoch (the Receiver waited for room first)."""
        with self._changed:
            self._items.append(QueuedBatch(self._epoch, batch))
            self._changed.notify_all()

    def get(self, timeout_s: float) -> QueuedBatch | None:
        """The oldest batch, or None after ``timeout_s`` or once :meth:`interrupt` was called."""
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._items) or self._interrupted, timeout_s):
                return None
            if self._interrupted:
                return None
            item = self._items.popleft()
            self._changed.notify_all()
            return item

    def new_epoch(self) -> int:
        """Drop every queued batch and start a new epoch. Hold ``epoch_lock``."""
        with self._changed:
            self._items.clear()
            self._epoch += 1
            self._changed.notify_all()
            return self._epoch

    def interrupt(self) -> None:
        """Wake a waiting :meth:`get` for good (the job is stopping)."""
        with self._changed:
            self._interrupted = True
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return len(self._items)
