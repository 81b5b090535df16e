"""A channel: one source table into one target, with a thread that stages and one that commits.

The Consumer hands a channel the raw row changes of its table, a run of
them at a time (:meth:`Channel.add_rows`, a
:class:`~canalbridge.sync.model.changes.RowRun`) or one by one
(:meth:`Channel.add`); the channel's staging thread decodes and maps them
(:mod:`canalbridge.sync.schema.target`) and sends them to the writer in
chunks while the transaction is still open, so that a commit only has to
flush the tail and apply. At a commit it seals the writer's transaction
into steps and hands them to the channel's committer thread
(:mod:`canalbridge.sync.channel.committer`), which applies them while the staging
thread goes on with the next transaction: commits overlap reading. (The
Consumer lets one commit run at a time, so a channel holds at most one
sealed transaction besides its open one.) A writer that decodes RowChange
bytes itself (the Spark writer, with the JVM decoder) gets them undecoded:
Python then reads only DDLs and the rows that teach it the table's
columns. Work reaches the staging thread through a bounded queue, which
also holds the Consumer back when the writer is slower than Canal.

Every wait on a channel has a bound: the Consumer waits for the queue and
for a commit at most ``stall_timeout_s`` (``commit_timeout_seconds``), then
raises :class:`ChannelStuckError`; it stops waiting at once when the job
stops. The threads end when the job stops, after the item in hand: a
commit that hangs in the target keeps its thread, and the job reports it
stuck.

A DDL on the channel's table that changes its columns splits the
transaction's work into steps: the rows before it (stamped with the last
of their positions), the schema change (stamped with the DDL's), the rows
after it. MySQL commits around a DDL, so these steps meet at source
transaction boundaries. Rows of another column layout (shards of a merged
target on either side of an ALTER) also start a step, possibly in the
middle of a source transaction. DDLs that change no column, and those
about the table as a whole (TRUNCATE by default, a RENAME the job does not
follow, DROP, CREATE), are logged and skipped; so are column changes on a
channel with an explicit ``columns`` list, whose next row must then fit
the list.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

import structlog

from canalbridge.sync.channel.committer import Committer
from canalbridge.sync.channel.maintenance import MaintenanceRun
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.channel.stager import Abort, AddChunk, Begin, Commit, Send, Stager, Statement, Work
from canalbridge.sync.channel.work import Committed, Published, ReadBack, ReadPosition, Staged
from canalbridge.sync.errors import ChannelStuckError, Stopping
from canalbridge.sync.model.changes import RowRun
from canalbridge.sync.model.position import Position, Refill
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.schema.target import TargetSchema
from canalbridge.sync.settings import ChannelSettings, MaintenanceSettings, SchemaSettings
from canalbridge.sync.snapshot.chunk_window import ChunkWindow
from canalbridge.sync.snapshot.progress import TableProgress
from canalbridge.sync.worker import STOP_CHECK_S

log = structlog.get_logger("canalbridge.channel")

SEND_EVERY_ENTRIES = 256  # entries gathered before they are handed to the staging thread
QUEUE_CHUNKS = 8  # chunks in flight before the Consumer waits
T = TypeVar("T")


class Channel:
    """One table's share of every transaction. Methods are called from the Consumer thread."""

    def __init__(self, job: str, settings: ChannelSettings, sink: ChannelSink, stop: threading.Event,
                 stall_timeout_s: float, *, maintenance: MaintenanceSettings | None = None,
                 schema: SchemaSettings | None = None, debug: bool = False, atomic: bool = False) -> None:
        """``atomic``: the job's cuts are atomic (``[job.cuts] atomic``): commits are staged, and the job's
        catalog commit makes them current."""
        self.job = job
        self.settings = settings
        self.source = settings.source
        self.sink = sink
        self.debug = debug
        self._atomic = atomic
        self.refill: Refill | None = None  # read at start: a refill an earlier process stopped in
        # The source table's name as the target recorded it once the channel followed a RENAME TABLE, else None:
        # read at start, for the router (which owns the name of the followed tables of the channels a run
        # starts with: those named for one table, the only ones that follow renames).
        self.source_table: str | None = None
        # Read at start: how far the snapshot of each source table of this target came (the snapshot's thread
        # goes on from there).
        self.snapshot: Mapping[str, TableProgress] = {}
        # Read at start: the target waits to be made anew (``canalbridge rebuild``). Until its rebuild window
        # (``rebuild_window``, set by the Consumer at its close signal) closes, the Consumer drops the table's
        # changes; once that window's transaction landed it clears this (Consumer thread).
        self.rebuild_pending = False
        self.rebuild_window: ChunkWindow | None = None
        self.maintenance = maintenance or MaintenanceSettings()  # (what a job without a section gets)
        self.schema = schema or SchemaSettings()
        self.entries_received = 0  # for metrics: written by the Consumer thread
        self._pending: list[RowRun | Statement] = []
        self._pending_entries = 0
        self._work: queue.Queue[Work] = queue.Queue(QUEUE_CHUNKS)
        self._stop = stop  # the job's: set when this run stops
        self._stall_timeout_s = stall_timeout_s
        self._label_sent = ""  # the Consumer's open transaction, for errors raised on its thread
        self._log = log.bind(job=job, channel=settings.source)
        self._committer: Committer | None = None  # made at start, once the target was read
        self._threads: tuple[threading.Thread, ...] = ()

    # -- lifecycle (Consumer thread / job) --------------------------------------------

    def start(self) -> None:
        """Read the target's state (position, refill, name, columns, snapshot) and start the threads."""
        state = self.sink.state.read_state()
        committed = state.position
        if state.refill is not None and committed is not None:
            held = (frozenset(self.sink.state.changes_held(state.refill, committed))
                    if self.settings.keeps_every_change else None)
            self.refill = Refill(state.refill, committed, held)
        self.source_table = state.source_table
        self.snapshot = state.snapshot
        self.rebuild_pending = state.rebuild
        target = TargetSchema(self.settings, self.schema, self.sink.writer.before_images(), self._log)
        target.reset(state.columns, state.aliases)
        self._committer = Committer(self.source, self.sink, self._stop, self.maintenance, self._stall_timeout_s,
                                    committed, state.label, self._log, atomic=self._atomic)
        # Columns that record a row's source are added in Python: the JVM decoder reads only what Canal sent.
        raw = self.sink.writer.decodes_row_changes() and not self.settings.origin_columns
        stager = Stager(self.source, self.sink, target, self._committer, raw=raw, debug=self.debug, log=self._log)
        self._threads = (
            threading.Thread(target=stager.run, args=(self._work, self._stop), name=f"channel-{self.job}-{self.source}",
                             daemon=True),
            threading.Thread(target=self._committer.run, name=f"committer-{self.job}-{self.source}", daemon=True),
        )
        for thread in self._threads:
            thread.start()
        self._log.info("channel.started", target=self.settings.target, committed=str(committed),
                       rebuild=state.rebuild or None)

    def join(self, timeout_s: float) -> bool:
        """Wait (after the job's stop event was set) for the threads to end; False if one is still busy."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        return not self.alive

    @property
    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    @property
    def committed_position(self) -> Position | None:
        """What the target holds: read at start, then as the committer thread commits."""
        return None if self._committer is None else self._committer.committed_position

    @property
    def committed_label(self) -> str | None:
        """The label of the newest commit of the job the target holds (None: none): read at start, then as the
        committer thread commits."""
        return None if self._committer is None else self._committer.committed_label

    @property
    def rows_written(self) -> int:
        return 0 if self._committer is None else self._committer.rows_written

    @property
    def last_commit_time_ms(self) -> int | None:
        """When a commit last landed in the target, in this run (None before the first)."""
        return None if self._committer is None else self._committer.last_commit_time_ms

    @property
    def last_maintenance(self) -> MaintenanceRun | None:
        return None if self._committer is None else self._committer.last_maintenance

    @property
    def layout_note(self) -> str | None:
        """The writer's note on a target layout that slows commits, once it has seen the target."""
        return self.sink.writer.layout_note()

    def await_result(self, future: Future[T], doing: str, since: float | None = None) -> T:
        """The result of ``future``, waiting at most the stall timeout from now (or from ``since``, a
        ``time.monotonic()`` of when the work was handed over); :class:`Stopping` if the job stops."""
        deadline = (time.monotonic() if since is None else since) + self._stall_timeout_s
        while True:
            try:
                return future.result(timeout=STOP_CHECK_S)
            except FutureTimeout:
                self._check_waiting(deadline, doing)

    # -- transaction (Consumer thread) ----------------------------------------------------

    def begin(self, label: str) -> None:
        self._pending, self._pending_entries = [], 0
        self._label_sent = label
        self._put(Begin(label))

    def add(self, position: Position, row_change: bytes, *, table: TableId, dml: bool = True,
            rows: int = 0) -> None:
        """Queue one ROWDATA entry's row change (or a DDL on this table, ``dml`` False) for this transaction.

        ``rows`` is the entry's ``rowsCount``, what the metrics count when the writer decodes; ``table``
        its (schema, table), as its header names it (a merged channel's shards, a renamed table).
        """
        pending = self._pending
        if not dml:
            pending.append(Statement(position, row_change, table))
        else:
            last = pending[-1] if pending else None
            if not isinstance(last, RowRun) or last.table != table or last.positions is None:
                last = RowRun(table, keeps_positions=True)
                pending.append(last)
            last.add(position, row_change, rows)
        self._counted(1)

    def add_rows(self, run: RowRun) -> None:
        """Queue a run of row changes of one table for this transaction, after what was added before it."""
        start = 0
        while start < len(run):
            # In pieces: what the queue holds stays bounded, whatever the size of a run.
            piece = run.piece(start, start + SEND_EVERY_ENTRIES - self._pending_entries)
            self._pending.append(piece)
            self._counted(len(piece))
            start += len(piece)

    def _counted(self, entries: int) -> None:
        self.entries_received += entries
        self._pending_entries += entries
        if self._pending_entries >= SEND_EVERY_ENTRIES:
            self._flush()

    def add_chunk(self, position: Position, window: ChunkWindow) -> None:
        """Queue ``window``'s snapshot chunk at ``position`` (its close signal's), after the rows added before it."""
        assert window.chunk is not None
        self._flush()
        self._put(AddChunk(position, window.table, window.chunk, window.key_columns, window.keys))

    def commit(self, end_position: Position) -> Future[Committed]:
        """Flush the tail and commit through ``end_position``; the next transaction may begin at once.

        The future resolves to True when rows were written, False when the
        transaction had none for this table, a :class:`Staged` write when the
        job's cuts are atomic (current once :meth:`published`), or raises
        ChannelCommitError.
        """
        self._flush()
        result: Future[Committed] = Future()
        self._put(Commit(end_position, result))
        return result

    def published(self, staged: Staged) -> None:
        """The job's catalog commit made ``staged`` (this channel's last commit) current: the committer thread
        takes it as committed."""
        assert self._committer is not None, "a channel that staged a write has a committer"
        self._committer.put(Published(staged))

    def abort(self, reason: str) -> Future[None]:
        self._pending, self._pending_entries = [], 0
        result: Future[None] = Future()
        self._put(Abort(reason, result))
        return result

    def read_committed_position(self) -> Future[ReadBack]:
        """Read the committed position back from the target (after a commit whose outcome is unknown).

        A commit can land in the target and still report a failure (the
        Spark JVM dies after Iceberg wrote the snapshot); the replay must then
        skip what landed, or a changelog would hold those changes twice. Read
        by the committer thread, after every commit handed to it. Of a commit
        applied in steps only the last that writes carries the commit's label:
        a label read back that names the commit means all of it landed.
        """
        result: Future[ReadBack] = Future()
        self._put(ReadPosition(self._label_sent, result))
        return result

    def _flush(self) -> None:
        if self._pending:
            self._put(Send(self._pending))
            self._pending = []
            self._pending_entries = 0

    def _put(self, item: Work) -> None:
        deadline = time.monotonic() + self._stall_timeout_s
        while True:
            try:
                self._work.put(item, timeout=STOP_CHECK_S)
                return
            except queue.Full:
                self._check_waiting(deadline, "handing work to the channel thread")

    def _check_waiting(self, deadline: float, doing: str) -> None:
        if self._stop.is_set():
            raise Stopping()
        now = time.monotonic()
        committer = self._committer
        if now < deadline or (committer is not None and now < committer.grace_until):
            return
        if committer is not None and committer.maintaining:
            raise ChannelStuckError(self.source, self._label_sent, "the table maintenance",
                                    self.maintenance.timeout_seconds, setting="maintenance.timeout_seconds")
        raise ChannelStuckError(self.source, self._label_sent, doing, self._stall_timeout_s)
