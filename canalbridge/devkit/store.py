"""The event store of one destination: a ring buffer with put/get/ack cursors.

It follows Canal's ``MemoryEventStoreWithBuffer``: a power-of-two ring of
``capacity`` slots and three sequences. ``put`` may not run more than
``capacity`` events ahead of the slower of the get and ack cursors, so a
client that never acks stalls the producer; ``get`` hands out events after
the get cursor; ``ack`` moves the ack cursor to the end of a batch;
``rollback`` returns the get cursor to the ack cursor.

Two batch modes, as in Canal: ``ITEMSIZE`` counts a get's ``batch_size`` in
events; ``MEMSIZE`` (canal.properties' default) counts it in units of
``mem_unit`` bytes and also caps the un-acked bytes at
``capacity * mem_unit``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from canalbridge.canal.server_defaults import STORE_BUFFER_SIZE, STORE_MEMUNIT
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition

INIT_SEQUENCE = -1

EntryType = entry_pb.EntryType
EventType = entry_pb.EventType
_DDL_EVENT_TYPES = frozenset(
    {
        EventType.CREATE,
        EventType.ALTER,
        EventType.ERASE,
        EventType.RENAME,
        EventType.TRUNCATE,
        EventType.CINDEX,
        EventType.DINDEX,
    }
)


class BatchMode(Enum):
    """How a get's batch size is counted (Canal's ``canal.instance.memory.batch.mode``)."""

    ITEMSIZE = "ITEMSIZE"
    MEMSIZE = "MEMSIZE"


class PutInterrupted(Exception):
    """A put waiting for room was interrupted (:meth:`EventStore.interrupt_put`): its events were not stored."""


class NoMatchAck(ValueError):
    """An ack of events the store no longer has handed out (a rollback between the get and the ack)."""


class StoreClosed(Exception):
    """The store was closed while a caller waited on it."""


@dataclass(frozen=True)
class StoredEvent:
    """One serialized Entry plus the header facts the store needs."""

    raw: bytes
    entry_type: int
    event_type: int
    position: EntryPosition
    schema: str = ""
    table: str = ""

    @classmethod
    def from_entry(cls, entry: entry_pb.Entry) -> StoredEvent:
        header = entry.header
        return cls(
            raw=entry.SerializeToString(),
            entry_type=entry.entryType,
            event_type=header.eventType,
            position=EntryPosition.of(entry),
            schema=header.schemaName,
            table=header.tableName,
        )

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def is_ddl(self) -> bool:
        return self.event_type in _DDL_EVENT_TYPES

    @property
    def is_transaction_boundary(self) -> bool:
        """Where Canal may move its meta cursor: a position a restart can resume from."""
        if self.entry_type == EntryType.TRANSACTIONEND or self.is_ddl:
            return True
        return self.entry_type == EntryType.TRANSACTIONBEGIN and not self.position.gtid


@dataclass(frozen=True)
class GetResult:
    """Events handed out by one get, with the sequence range they cover."""

    events: tuple[StoredEvent, ...]
    end_sequence: int
    # The last transaction boundary in the batch (Canal's PositionRange.ack):
    # the meta cursor moves there when the batch is acked.
    ack_position: EntryPosition | None


@dataclass(frozen=True)
class StoreCursors:
    """A consistent reading of the three sequences and the un-acked bytes."""

    put: int
    get: int
    ack: int
    unacked_bytes: int

    @property
    def unacked_events(self) -> int:
        return self.put - self.ack


class EventStore:
    """Canal's memory store for one destination. Thread-safe."""

    def __init__(
        self,
        capacity: int = STORE_BUFFER_SIZE,
        mem_unit: int = STORE_MEMUNIT,
        batch_mode: BatchMode = BatchMode.ITEMSIZE,
    ) -> None:
        if capacity <= 0 or capacity & (capacity - 1):
            raise ValueError(f"store capacity must be a power of 2, got {capacity}")
        self.capacity = capacity
        self.mem_unit = mem_unit
        self.batch_mode = batch_mode
        self._mask = capacity - 1
        self._slots: list[StoredEvent | None] = [None] * capacity
        self._put_seq = INIT_SEQUENCE
        self._get_seq = INIT_SEQUENCE
        self._ack_seq = INIT_SEQUENCE
        self._put_bytes = 0
        self._get_bytes = 0
        self._ack_bytes = 0
        self._closed = False
        self._put_waiting = False
        self._put_interrupted = False
        self._ack_listeners: list[Callable[[list[StoredEvent]], None]] = []
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._changed = threading.Condition(self._lock)  # any cursor moved

    # -- put ----------------------------------------------------------------

    def put(self, events: list[StoredEvent], timeout_s: float | None = None) -> bool:
        """Append ``events`` as one unit; wait for room up to ``timeout_s`` (None: forever).

        Returns False when the room did not come in time. A list larger than
        the capacity can never fit, as in Canal: the caller must split it.
        """
        if not events:
            return True
        if len(events) > self.capacity:
            raise ValueError(f"{len(events)} events can never fit a store of {self.capacity}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            try:
                # Interrupted first: room that came with the interruption does not save the put.
                while not (self._put_interrupted or self._has_room(len(events))):
                    if self._closed:
                        raise StoreClosed("store closed while waiting for room")
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._put_waiting = True
                    self._not_full.wait(remaining)
                if self._put_interrupted:
                    raise PutInterrupted(f"{len(events)} events not stored")
            finally:
                self._put_waiting = self._put_interrupted = False
            self._append(events)
            return True

    @property
    def put_waiting(self) -> bool:
        """A put is waiting for room (the parser is held back by un-acked events)."""
        with self._lock:
            return self._put_waiting

    def interrupt_put(self) -> bool:
        """Make a put waiting for room give up, as Canal interrupts its sink when a dump fails; True if one waited."""
        with self._lock:
            if not self._put_waiting:
                return False
            self._put_interrupted = True
            self._not_full.notify_all()
            return True

    def try_put(self, events: list[StoredEvent]) -> bool:
        """Append ``events`` if they fit now; report False when the store is full."""
        return self.put(events, timeout_s=0)

    def _has_room(self, count: int) -> bool:
        wrap_point = self._put_seq + count - self.capacity
        if wrap_point > min(self._get_seq, self._ack_seq):
            return False
        if self.batch_mode is BatchMode.MEMSIZE:
            return self._put_bytes - self._ack_bytes < self.capacity * self.mem_unit
        return True

    def _append(self, events: list[StoredEvent]) -> None:
        sequence = self._put_seq
        for event in events:
            sequence += 1
            self._slots[sequence & self._mask] = event
            self._put_bytes += event.size
        self._put_seq = sequence
        self._not_empty.notify_all()
        self._changed.notify_all()

    # -- get ----------------------------------------------------------------

    def get(self, batch_size: int, wait_s: float | None) -> GetResult:
        """Hand out events after the get cursor.

        ``wait_s`` 0 returns at once with what is there; a positive value
        waits that long for a full batch and then returns what is there;
        None waits until a full batch is there (Canal's get without timeout).
        """
        deadline = None if wait_s is None else time.monotonic() + wait_s
        with self._lock:
            while not self._has_full_batch(batch_size):
                if self._closed:
                    raise StoreClosed("store closed while waiting for events")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._not_empty.wait(remaining)
            return self._take(batch_size)

    def _has_full_batch(self, batch_size: int) -> bool:
        if self.batch_mode is BatchMode.ITEMSIZE:
            return self._put_seq - self._get_seq >= batch_size
        return self._put_bytes - self._get_bytes >= batch_size * self.mem_unit

    def _take(self, batch_size: int) -> GetResult:
        events: list[StoredEvent] = []
        sequence = self._get_seq
        taken_bytes = 0
        if self.batch_mode is BatchMode.ITEMSIZE:
            last = min(self._get_seq + batch_size, self._put_seq)
            while sequence < last:
                sequence += 1
                event = self._slot(sequence)
                events.append(event)
                taken_bytes += event.size
        else:
            # Like Canal: keep adding while under the byte budget, so a batch
            # may overshoot by one event but always holds at least one.
            budget = batch_size * self.mem_unit
            while taken_bytes <= budget and sequence < self._put_seq:
                sequence += 1
                event = self._slot(sequence)
                events.append(event)
                taken_bytes += event.size
        if not events:
            return GetResult((), self._get_seq, None)
        ack_position = next(
            (event.position for event in reversed(events) if event.is_transaction_boundary), None
        )
        self._get_seq = sequence
        self._get_bytes += taken_bytes
        self._not_full.notify_all()
        self._changed.notify_all()
        return GetResult(tuple(events), sequence, ack_position)

    def _slot(self, sequence: int) -> StoredEvent:
        event = self._slots[sequence & self._mask]
        assert event is not None, f"slot of sequence {sequence} is empty"
        return event

    # -- ack / rollback -------------------------------------------------------

    def add_ack_listener(self, listener: Callable[[list[StoredEvent]], None]) -> None:
        """Call ``listener`` with the events of every ack, before they are released.

        The listener runs under the store's lock: it must not call back into the store.
        """
        self._ack_listeners.append(listener)

    def ack(self, end_sequence: int) -> None:
        """Release every event up to and including ``end_sequence``."""
        with self._lock:
            if not self._ack_seq < end_sequence <= self._get_seq:
                raise NoMatchAck(
                    f"ack to sequence {end_sequence} outside ({self._ack_seq}, {self._get_seq}]"
                )
            if self._ack_listeners:
                acked = [self._slot(s) for s in range(self._ack_seq + 1, end_sequence + 1)]
                for listener in self._ack_listeners:
                    listener(acked)
            for sequence in range(self._ack_seq + 1, end_sequence + 1):
                slot = sequence & self._mask
                event = self._slots[slot]
                assert event is not None
                self._ack_bytes += event.size
                self._slots[slot] = None
            self._ack_seq = end_sequence
            self._not_full.notify_all()
            self._changed.notify_all()

    def rollback(self) -> None:
        """Return the get cursor to the ack cursor: un-acked events will be handed out again."""
        with self._lock:
            self._get_seq = self._ack_seq
            self._get_bytes = self._ack_bytes
            self._not_empty.notify_all()
            self._changed.notify_all()

    def drain(self) -> list[StoredEvent]:
        """Take out every event not yet acked, in order: the store is empty after (a restarting Canal's is)."""
        with self._lock:
            events = [self._slot(s) for s in range(self._ack_seq + 1, self._put_seq + 1)]
            for sequence in range(self._ack_seq + 1, self._put_seq + 1):
                self._slots[sequence & self._mask] = None
            self._get_seq = self._ack_seq = self._put_seq
            self._get_bytes = self._ack_bytes = self._put_bytes
            self._not_full.notify_all()
            self._changed.notify_all()
            return events

    # -- lifecycle and inspection ----------------------------------------------

    def close(self) -> None:
        """Wake every waiter with ``StoreClosed``; used when the server stops."""
        with self._lock:
            self._closed = True
            self._not_full.notify_all()
            self._not_empty.notify_all()

    def reopen(self) -> None:
        """Accept waiters again after ``close`` (a server restart keeps the store)."""
        with self._lock:
            self._closed = False

    def cursors(self) -> StoreCursors:
        with self._lock:
            return self._cursors_locked()

    def _cursors_locked(self) -> StoreCursors:
        return StoreCursors(
            self._put_seq, self._get_seq, self._ack_seq, self._put_bytes - self._ack_bytes
        )

    def wait_for(self, predicate: Callable[[StoreCursors], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(cursors)`` holds; False if ``timeout_s`` passed first."""
        with self._lock:
            return self._changed.wait_for(lambda: predicate(self._cursors_locked()), timeout_s)
