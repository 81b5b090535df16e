"""One Canal destination of the dev server: credentials, store, clients, and its binlog feed.

Entries fed to a destination wait in its *source log* (the stand-in for the
MySQL binlog) until a parser thread moves them into the store, the way
Canal's parser does: it starts with the first subscription, drops ROWDATA
entries that the subscription filter rejects, and blocks while the store is
full, so a slow or non-acking client holds the source back exactly as it
holds back Canal's parser.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from canalbridge.canal.scramble import server_check, stored_password_hash
from canalbridge.canal.server_defaults import STORE_BUFFER_SIZE, STORE_MEMUNIT, TRANSACTION_SIZE
from canalbridge.devkit.held_get import HeldGet
from canalbridge.devkit.meta import ClientMeta
from canalbridge.devkit.store import BatchMode, EventStore, PutInterrupted, StoreClosed, StoredEvent
from canalbridge.devkit.table_filter import TableFilter
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition


@dataclass(frozen=True)
class DestinationConfig:
    """How one destination is set up (Canal's instance.properties, in short)."""

    name: str
    username: str = ""
    password: str = ""
    capacity: int = STORE_BUFFER_SIZE
    mem_unit: int = STORE_MEMUNIT
    batch_mode: BatchMode = BatchMode.ITEMSIZE
    # canal.file.flush.period: how often Canal writes its meta cursor to meta.dat
    # (1 s); a crashed Canal delivers again what was acked since the last write.
    meta_flush_period_s: float = 1.0

    def __repr__(self) -> str:  # keeps the password out of logs and test output
        return (
            f"DestinationConfig(name={self.name!r}, username={self.username!r}, "
            f"capacity={self.capacity}, batch_mode={self.batch_mode.value})"
        )


class Destination:
    """State of one destination; shared by every connection to it."""

    def __init__(self, config: DestinationConfig) -> None:
        self.config = config
        self.name = config.name
        self.store = EventStore(config.capacity, config.mem_unit, config.batch_mode)
        self._password_hash = stored_password_hash(config.password) if config.password else b""
        self._clients: dict[str, ClientMeta] = {}
        self._clients_lock = threading.Lock()
        # Held across a get and the batch id it creates, as Canal synchronises
        # getWithoutAck on the instance: batch ids then follow store order.
        self.get_lock = threading.Lock()
        self.held_get: HeldGet | None = None  # fault injection, see hold_next_get
        self._filter = TableFilter("")
        self._source: collections.deque[Iterator[entry_pb.Entry]] = collections.deque()
        self._source_cond = threading.Condition()
        self._in_flight = False  # a chunk drawn from the source is being put
        self._parser: threading.Thread | None = None
        self._stopping = False
        self._halted = False  # the server is stopped: no parser may start
        # What a restarted Canal delivers again. Its parser dumps the binlog from the
        # meta cursor, the start of the last transaction boundary acked (BEGIN, END or
        # DDL), so that entry and the acked part of an open transaction come again
        # after any restart; after a crash, from the cursor its timer last flushed.
        # Acked events from the cursor on, and before it since the last flush:
        self._acked_from_cursor: list[StoredEvent] = []
        self._acked_since_flush: list[StoredEvent] = []
        self._flushed_tick = self._flush_tick()
        self._meta_lock = threading.Lock()
        # What a lost MySQL connection puts into the store again: Canal's parser records
        # a position only at a transaction end it put, and dumps again from there.
        self._since_end: list[StoredEvent] = []  # the last end put and everything put after it
        self._connection_lost = False
        self.sent_again: set[EntryPosition] = set()  # positions a lost connection put back (for audits)
        self.store.add_ack_listener(self._acked)

    # -- credentials --------------------------------------------------------

    def accepts(self, username: str, token: bytes, seed: bytes) -> bool:
        """Canal's server-side auth: user must match (when set), then the scramble."""
        if self.config.username and username != self.config.username:
            return False
        if not self._password_hash:
            return True
        if not token:
            return False
        return server_check(token, self._password_hash, seed)

    # -- clients --------------------------------------------------------------

    def client(self, client_id: str) -> ClientMeta:
        with self._clients_lock:
            meta = self._clients.get(client_id)
            if meta is None:
                meta = self._clients[client_id] = ClientMeta(self.name, client_id)
            return meta

    def clients(self) -> list[ClientMeta]:
        with self._clients_lock:
            return list(self._clients.values())

    def subscribe(self, client_id: str, filter_text: str) -> ClientMeta:
        """Subscribe a client; the newest filter governs what the parser keeps."""
        meta = self.client(client_id)
        meta.subscribed = True
        with self._source_cond:
            self._filter = TableFilter(filter_text)
        self.start_parser()
        return meta

    def hold_next_get(self) -> HeldGet:
        """Hold this destination's next GET until another connection rolls back (see HeldGet)."""
        self.held_get = HeldGet()
        return self.held_get

    # -- the source log and its parser -------------------------------------------

    def feed(self, entries: Iterable[entry_pb.Entry]) -> None:
        """Append entries to the source log. Iterables are consumed lazily."""
        with self._source_cond:
            self._source.append(iter(entries))
            self._source_cond.notify_all()

    def start_parser(self) -> None:
        """Start the parser thread, unless it runs or the server is stopping (see :meth:`stop_parser`)."""
        with self._source_cond:
            if self._parser is not None or self._halted:
                return
            self._stopping = False
            self._parser = threading.Thread(
                target=self._parse_loop, name=f"devserver-parser-{self.name}", daemon=True
            )
            self._parser.start()

    @property
    def parser_alive(self) -> bool:
        """Whether the parser thread runs (it ends when the server stops, or when reading the source fails)."""
        parser = self._parser
        return parser is not None and parser.is_alive()

    def stop_parser(self) -> None:
        """Stop the parser thread; entries not yet in the store stay in the source log.

        The caller closes the store first, so that a parser blocked in a full
        store wakes up. No parser starts again (a subscription handled while
        the server stops) until :meth:`allow_parser`.
        """
        with self._source_cond:
            parser, self._parser = self._parser, None
            self._stopping = True
            self._halted = True
            self._source_cond.notify_all()
        if parser is not None:
            parser.join()

    def allow_parser(self) -> None:
        """Let :meth:`start_parser` start a parser again (the server listens again)."""
        with self._source_cond:
            self._halted = False

    def _parse_loop(self) -> None:
        while True:
            events = self._next_chunk()
            if events is None:
                return
            try:
                self.store.put(events)
            except StoreClosed:
                self._keep_for_next_start(events)
                return
            except PutInterrupted:
                if not self._dump_again(lost=events):
                    return
                continue
            with self._source_cond:
                self._note_put(events)
                self._in_flight = False
                self._source_cond.notify_all()

    def _keep_for_next_start(self, events: list[StoredEvent]) -> None:
        # The server stopped: keep the chunk for the next start so nothing is lost.
        with self._source_cond:
            self._source.appendleft(iter([entry_of(event) for event in events]))
            self._in_flight = False
            self._source_cond.notify_all()

    def _next_chunk(self) -> list[StoredEvent] | None:
        """Draw up to one chunk of kept entries from the source; None when stopping."""
        with self._source_cond:
            while not self._stopping:
                if self._connection_lost:
                    self._put_back_since_end_locked([])
                events = self._draw_locked()
                if events:
                    self._in_flight = True
                    return events
                self._source_cond.notify_all()  # the source may just have run dry
                self._source_cond.wait()
            return None

    def _draw_locked(self, *, before_an_end: bool = False) -> list[StoredEvent]:
        limit = min(TRANSACTION_SIZE, self.store.capacity)  # Canal's parser flush
        events: list[StoredEvent] = []
        while self._source and len(events) < limit:
            entry = next(self._source[0], None)
            if entry is None:
                self._source.popleft()
            elif before_an_end and entry.entryType == entry_pb.EntryType.TRANSACTIONEND:
                self._source.appendleft(iter([entry]))
                break
            elif self._keeps(entry):
                events.append(StoredEvent.from_entry(entry))
        return events

    # -- a lost MySQL connection ---------------------------------------------------------

    def lose_mysql_connection(self) -> None:
        """What Canal does when its MySQL connection breaks (MySQL restarts, a network fault, a KILL).

        Canal's parser records a position only at a transaction end it has put
        in the store, and dumps the binlog again from there: that end and all
        put after it come a second time, in the same stream, with no rollback
        for the clients (seen with real Canal: docs/guide/limits.md#canal-lost-connection). A chunk
        waiting for room in a full store is dropped, because Canal interrupts
        its sink, while the next chunk the parser had in hand is still put: the
        first pass then has a gap that only the second fills.
        """
        with self._source_cond:
            self._connection_lost = True
            self._source_cond.notify_all()
        self.store.interrupt_put()

    def _note_put(self, events: list[StoredEvent]) -> None:
        ends = [i for i, event in enumerate(events) if event.entry_type == entry_pb.EntryType.TRANSACTIONEND]
        if ends:
            self._since_end = events[ends[-1]:]
        else:
            self._since_end.extend(events)

    def _dump_again(self, lost: list[StoredEvent]) -> bool:
        """The put of ``lost`` was interrupted: put the next chunk, then the second pass. False when stopping."""
        with self._source_cond:
            # Canal's parser flushes a chunk at each transaction end. Had the next chunk
            # ended one, Canal would dump again from that end and the lost chunk would be
            # lost for good (docs/guide/limits.md#what-remains), which no client can mend: model the other case.
            after = self._draw_locked(before_an_end=True)
        try:
            self.store.put(after)
        except StoreClosed:
            self._keep_for_next_start(lost + after)
            return False
        except PutInterrupted:
            pass  # lost as well: the second pass covers it
        with self._source_cond:
            self._put_back_since_end_locked(lost + after)
            self._in_flight = False
            self._source_cond.notify_all()
        return True

    def _put_back_since_end_locked(self, not_stored: list[StoredEvent]) -> None:
        again = self._since_end + not_stored
        self._since_end, self._connection_lost = [], False
        self.sent_again.update(event.position for event in again)
        if again:
            self._source.appendleft(iter([entry_of(event) for event in again]))

    def _keeps(self, entry: entry_pb.Entry) -> bool:
        if entry.entryType != entry_pb.EntryType.ROWDATA:
            return True
        header = entry.header
        return self._filter.matches(header.schemaName, header.tableName)

    # -- Canal's meta cursor and restarts ---------------------------------------------

    def _acked(self, events: list[StoredEvent]) -> None:
        # Runs under the store's lock (an ack listener): touches only the meta state.
        with self._meta_lock:
            self._flush_if_due_locked()
            for event in events:
                if event.is_transaction_boundary:  # the cursor moves to it
                    self._acked_since_flush.extend(self._acked_from_cursor)
                    self._acked_from_cursor = [event]
                else:
                    self._acked_from_cursor.append(event)

    def _flush_tick(self) -> float:
        # Canal's flush runs on a timer: a flush has happened since the last one
        # whenever the period count moved on. An infinite period never flushes.
        period = self.config.meta_flush_period_s
        return 0.0 if math.isinf(period) else math.floor(time.monotonic() / period)

    def _flush_if_due_locked(self) -> None:
        tick = self._flush_tick()
        if tick > self._flushed_tick:
            self._acked_since_flush = []
            self._flushed_tick = tick

    def reparse_from_cursor(self, *, crashed: bool) -> int:
        """What a restart leaves (parser stopped, store closed): an empty store, the source read again from the cursor.

        Events not yet acked go back to the front of the source log, after the
        acked events a restarted Canal delivers again: from the cursor's entry
        on, and after a crash everything acked since the last meta flush (a
        clean stop flushes). Returns how many acked events will come again.
        """
        with self._meta_lock:
            self._flush_if_due_locked()
            again = (self._acked_since_flush if crashed else []) + self._acked_from_cursor
            self._acked_since_flush, self._acked_from_cursor = [], []
        with self._source_cond:  # one step for wait_acked: never "all acked" in between
            self._since_end, self._connection_lost = [], False  # the new parser starts from the cursor
            entries = [entry_of(event) for event in again + self.store.drain()]
            if entries:
                self._source.appendleft(iter(entries))
                self._source_cond.notify_all()
        return len(again)

    def read_another_server(self, entries: Iterable[entry_pb.Entry]) -> None:
        """Canal pointed at another MySQL server while stopped (a failover): it starts from ``entries``, that
        server's binlog, and what it had not yet delivered of the old one is gone. Call between stop and start."""
        with self._source_cond:
            self._source.clear()
            self._since_end, self._connection_lost = [], False
            self._source.append(iter(entries))
            self._source_cond.notify_all()

    # -- observation ----------------------------------------------------------------

    def wait_parsed(self, timeout_s: float) -> bool:
        """Wait until every fed entry has reached the store (or was filtered out)."""
        with self._source_cond:
            return self._source_cond.wait_for(
                lambda: not self._source and not self._in_flight, timeout_s
            )

    def wait_acked(self, timeout_s: float) -> bool:
        """Wait until every fed entry is in the store and acked by a client."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.wait_parsed(deadline - time.monotonic()):
                return False
            if not self.store.wait_for(lambda cursors: cursors.ack == cursors.put, deadline - time.monotonic()):
                return False
            with self._source_cond:  # both at once: a restart may have put entries back in between
                cursors = self.store.cursors()
                if not self._source and not self._in_flight and cursors.ack == cursors.put:
                    return True


def entry_of(event: StoredEvent) -> entry_pb.Entry:
    """Parse a stored event back into an Entry (used when a put is interrupted)."""
    entry = entry_pb.Entry()
    entry.ParseFromString(event.raw)
    return entry

