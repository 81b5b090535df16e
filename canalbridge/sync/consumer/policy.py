"""When the Consumer closes a transaction.

A commit is *due* when data is pending and any of these hold (Doris's rules):
the commit interval has passed since the transaction began; at least
``min_events`` entries and ``min_bytes`` bytes are pending; ``max_bytes``
are pending. A due commit waits for the open source (MySQL) transaction to
end, so a target never shows half of one, unless waiting must end:

- the source transaction has been open longer than
  ``max_source_txn_wait_seconds``, or
- the un-acked entries come so close to Canal's store capacity that the
  store would stop handing out entries and the transaction end could never
  arrive: within one get's size of the capacity, or within one parser flush
  (``canal.instance.transaction.size`` entries, which the store takes only
  when that many slots are free), whichever is nearer.

Either way the commit then takes part of the source transaction, and the
log says so. Well before that, from half of the store on, a commit is due
at the next clean cut (the store's ``store_capacity`` reason): so only a
source transaction too large for the room left ever has to be split. A get
takes at most a quarter of the store (:meth:`CanalSettings.fetch_size`, and
:mod:`canalbridge.sync.source.canal.get_size` in MEMSIZE mode), so that no single batch
fills it. The store counts entries, and in MEMSIZE
mode (Canal's shipped default) also serialized bytes against
``store_capacity x memunit``, with a get's size in memunits; whichever bound
is nearer decides.

While an earlier commit is still being applied (``commit.overlap``), what
it holds is acked when it lands: store pressure counts only what came
after its cut (``committing`` is what Canal held at that cut). The next
transaction reads on past its thresholds until it holds ``max_bytes``, or
until what came after that cut reaches half the store; its next clean cut
then waits for the earlier commit and commits: reading on past it instead
would fill the store until a small source transaction had to be split.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from canalbridge.sync.settings import CommitSettings
from canalbridge.sync.source.link import Outstanding

IN_FLIGHT_POLL_S = 0.05  # how long a take waits while a commit runs, so its acks go out promptly


class Committing(Protocol):
    """The commit in flight, as the policy sees it."""

    @property
    def outstanding(self) -> Outstanding:
        """What the source held for this client at its cut: acked once it lands."""
        ...

    def done(self) -> bool:
        """Whether every channel answered."""
        ...


@dataclass
class PendingWork:
    """What the open transaction holds; owned by the Consumer."""

    started_at: float
    events: int = 0
    bytes: int = 0
    source_txn_open_since: float | None = None
    cut_due: str | None = None  # a cut the stream asks for whatever the thresholds say (a subscribed table's DDL)

    def open_source_txn(self) -> None:
        """A source transaction's first entry was routed (a BEGIN, or MariaDB's first statement)."""
        if self.source_txn_open_since is None:
            self.source_txn_open_since = time.monotonic()

    def close_source_txn(self) -> None:
        """The open source transaction ended (or what came before the next entry is whole)."""
        self.source_txn_open_since = None

    @property
    def in_source_txn(self) -> bool:
        return self.source_txn_open_since is not None


class CommitPolicy:
    """Decides, from pending work and time, whether and how to commit."""

    def __init__(self, settings: CommitSettings, store_get_size: int | None) -> None:
        """``store_get_size``: the most one get asks of the source's store (the link's
        :attr:`~canalbridge.sync.source.link.ConsumerSide.store_get_size`); None: the source holds no store
        that un-acked entries fill (Kafka)."""
        self.settings = settings
        self.store = store_get_size is not None
        batch_size = store_get_size or 0
        capacity = settings.store_capacity
        # Past these the store may stop handing out entries before the transaction ends: a split is a must.
        full = capacity - min(settings.store_transaction_size, capacity)
        self.split_bytes: int | None = None
        self.pressure_bytes: int | None = None  # from here a commit is due at the next clean cut
        if settings.store_batch_mode == "MEMSIZE":
            # A get hands out up to batch_size memunits, however many entries that is.
            store_bytes, get_bytes = capacity * settings.store_memunit, batch_size * settings.store_memunit
            self.split_bytes = max(1, store_bytes - get_bytes)
            self.pressure_bytes = min(store_bytes // 2, self.split_bytes)
        else:
            full = min(full, capacity - batch_size)
        self.split_entries = max(1, full)
        self.pressure_entries = max(1, min(capacity // 2, self.split_entries))

    def _store_pressure(self, outstanding: Outstanding, committing: Outstanding | None, *, split: bool) -> bool:
        if not self.store:
            return False
        if committing is not None:
            outstanding = outstanding.less(committing)
        entries, size = (self.split_entries, self.split_bytes) if split else (self.pressure_entries,
                                                                            self.pressure_bytes)
        return outstanding.entries >= entries or (size is not None and outstanding.bytes >= size)

    def pressed(self, outstanding: Outstanding, committing: Outstanding | None = None) -> bool:
        """Whether the store is so full that the next clean cut must commit, even before the commit in flight
        lands (it is waited for): what comes after is read only once that room is made."""
        return self._store_pressure(outstanding, committing, split=False)

    def due(self, work: PendingWork, outstanding: Outstanding, now: float,
            committing: Outstanding | None = None) -> str | None:
        """The reason a commit is due, or None."""
        if outstanding.entries == 0:
            return None
        settings = self.settings
        if work.bytes >= settings.max_bytes:
            return "max_bytes"
        if work.events >= settings.min_events and work.bytes >= settings.min_bytes:
            return "min_events_and_bytes"
        if now - work.started_at >= settings.interval_seconds:
            return "interval"
        if self._store_pressure(outstanding, committing, split=False):
            return "store_capacity"
        return None

    def cut_reason(self, work: PendingWork, outstanding: Outstanding, now: float,
                   in_flight: Committing | None = None) -> str | None:
        """Why the open transaction is to commit now, or None: it is not due, or it reads on while the commit
        ``in_flight`` runs. A reason given while that commit runs means: wait for it first. (The Consumer
        then commits if it may cut here: see :meth:`must_split_source_txn`.)"""
        committing = in_flight.outstanding if in_flight is not None else None
        reason = work.cut_due or self.due(work, outstanding, now, committing)
        if reason is None or in_flight is None or in_flight.done():
            return reason
        if not work.in_source_txn and self.pressed(outstanding, committing):
            return "store_capacity"  # (waits for the commit in flight: the log says why)
        if work.cut_due is None and work.bytes < self.settings.max_bytes:
            return None  # read on while the commit before this one runs
        return reason

    def must_split_source_txn(self, work: PendingWork, outstanding: Outstanding, now: float,
                              committing: Outstanding | None = None, *, starved: bool = True) -> str | None:
        """Why a due commit may not wait for the source transaction to end, or None.

        ``starved``: the source has handed out nothing for a while. Until then
        the transaction's end may come next, however full the store looks: an
        ack just made room, and Canal's batches are acked whole, so a store
        that looks full right after a commit need not be.
        """
        if starved and self._store_pressure(outstanding, committing, split=True):
            return "store_capacity"
        if work.source_txn_open_since is not None:
            if now - work.source_txn_open_since >= self.settings.max_source_txn_wait_seconds:
                return "source_txn_wait"
        return None

    def poll_timeout(self, work: PendingWork, now: float, *, committing: bool = False) -> float:
        """How long the Consumer may block waiting for a batch before re-checking; ``committing``: while a
        commit runs, whose acks go out as soon as it lands."""
        until_interval = work.started_at + self.settings.interval_seconds - now
        return min(max(until_interval, 0.05), IN_FLIGHT_POLL_S if committing else 1.0)
