"""When the Consumer closes a transaction.

A commit is *due* when data is pending and any of these hold (Doris's rules):
the commit interval has passed since the transaction began; at least
``min_events`` entries and ``min_bytes`` bytes are pending; ``max_bytes``
are pending. A due commit waits for the open source (MySQL) transaction to
end, so a target never shows half of one, unless waiting must end:

- the source transaction has been open longer than
  ``max_source_txn_wait_seconds``, or
- the un-acked entries come close to Canal's store capacity, where the
  store stops handing out entries and the transaction end could never
  arrive. Close means: within one get's ``batch_size`` of the capacity, or
  past half of it, whichever is smaller.

Either way the commit then takes part of the source transaction, and the
log says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from canalbridge.sync.settings import CommitSettings


@dataclass
class PendingWork:
    """What the open transaction holds; owned by the Consumer."""

    started_at: float
    events: int = 0
    bytes: int = 0
    source_txn_open_since: float | None = None

    @property
    def in_source_txn(self) -> bool:
        return self.source_txn_open_since is not None


class CommitPolicy:
    """Decides, from pending work and time, whether and how to commit."""

    def __init__(self, settings: CommitSettings, batch_size: int) -> None:
        self.settings = settings
        self.pressure_entries = max(1, min(settings.store_capacity - batch_size, settings.store_capacity // 2))

    def due(self, work: PendingWork, outstanding_entries: int, now: float) -> str | None:
        """The reason a commit is due, or None."""
        if outstanding_entries == 0:
            return None
        settings = self.settings
        if work.bytes >= settings.max_bytes:
            return "max_bytes"
        if work.events >= settings.min_events and work.bytes >= settings.min_bytes:
            return "min_events_and_bytes"
        if now - work.started_at >= settings.interval_seconds:
            return "interval"
        if outstanding_entries >= self.pressure_entries:
            return "store_capacity"
        return None

    def must_split_source_txn(self, work: PendingWork, outstanding_entries: int, now: float) -> str | None:
        """Why a due commit may not wait for the source transaction to end, or None."""
        if outstanding_entries >= self.pressure_entries:
            return "store_capacity"
        if work.source_txn_open_since is not None:
            if now - work.source_txn_open_since >= self.settings.max_source_txn_wait_seconds:
                return "source_txn_wait"
        return None

    def poll_timeout(self, work: PendingWork, now: float) -> float:
        """How long the Consumer may block waiting for a batch before re-checking."""
        until_interval = work.started_at + self.settings.interval_seconds - now
        return min(max(until_interval, 0.05), 1.0)
