"""The hand-off between a link's Receiver thread and the Consumer: a bounded queue, and the lock around it.

Every source hands its batches over the same way (as Debezium's
``ChangeEventQueue`` does for its connectors): the Receiver waits for room,
puts a batch, and the Consumer takes the oldest, waiting at most a bound.
A rollback or reconnect clears what is queued; closing wakes every waiter
for good. A link keeps its own bookkeeping (Canal's batch ledger, Kafka's
lanes) under the same lock, so that a batch is queued, taken or voided
together with what the link records of it.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class HandOff(Generic[T]):
    """A bounded queue of ``T`` and the condition that guards it (and the link's state: :attr:`lock`)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lock = threading.Condition()
        self._items: collections.deque[T] = collections.deque()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def wait_for_room(self, timeout_s: float) -> bool:
        """Wait until the queue can take one more item (or the hand-off was closed)."""
        with self.lock:
            return self.lock.wait_for(lambda: len(self._items) < self.capacity or self._closed, timeout_s)

    def put_locked(self, item: T) -> None:
        """Queue ``item`` (the caller holds :attr:`lock`) and wake the Consumer."""
        self._items.append(item)
        self.lock.notify_all()

    def clear_locked(self) -> None:
        """Drop everything queued (the caller holds :attr:`lock`): a rollback or a reconnect voids it."""
        self._items.clear()
        self.lock.notify_all()

    def take(self, timeout_s: float, taken: Callable[[T], None]) -> T | None:
        """The oldest item, or None after ``timeout_s`` or once closed; ``taken`` runs with it under the lock
        (the link records that the Consumer has it)."""
        with self.lock:
            if not self.lock.wait_for(lambda: bool(self._items) or self._closed, timeout_s) or self._closed:
                return None
            item = self._items.popleft()
            taken(item)
            self.lock.notify_all()  # (room for the Receiver)
            return item

    def close(self) -> None:
        """Wake every waiter for good."""
        with self.lock:
            self._closed = True
            self.lock.notify_all()
