"""Per-client batch bookkeeping, as Canal's ``MemoryMetaManager`` keeps it."""

from __future__ import annotations

import threading
from dataclasses import dataclass


class MetaError(Exception):
    """A request the meta manager refuses; the server answers it with an error Ack."""


@dataclass(frozen=True)
class BatchRange:
    """The store range one batch id covers."""

    end_sequence: int


class ClientMeta:
    """One client identity's subscription and outstanding batches (the destination keeps the meta cursor).

    Batch ids start at 1 and only grow for the life of the server (Canal's
    ``MemoryClientIdentityBatch`` counter, new with every start), and acks
    and rollbacks must name the oldest outstanding batch: Canal refuses any
    other order because it could lose data.
    """

    def __init__(self, destination: str, client_id: str) -> None:
        self.destination = destination
        self.client_id = client_id
        self.subscribed = False
        self._batches: dict[int, BatchRange] = {}
        self._next_batch_id = 1
        self._lock = threading.Lock()

    def add_batch(self, batch: BatchRange) -> int:
        with self._lock:
            batch_id = self._next_batch_id
            self._next_batch_id += 1
            self._batches[batch_id] = batch
            return batch_id

    def remove_batch(self, batch_id: int) -> BatchRange | None:
        """Remove ``batch_id`` if it is the oldest; None if it is not outstanding."""
        with self._lock:
            if batch_id not in self._batches:
                return None
            oldest = min(self._batches)
            if batch_id != oldest:
                raise MetaError(f"batchId:{batch_id} is not the firstly:{oldest}")
            return self._batches.pop(batch_id)

    def clear_batches(self) -> None:
        with self._lock:
            self._batches.clear()

    def restart(self) -> None:
        """What a Canal restart leaves: no outstanding batch, and batch ids from 1 again."""
        with self._lock:
            self._batches.clear()
            self._next_batch_id = 1

    def outstanding(self) -> list[int]:
        with self._lock:
            return sorted(self._batches)
