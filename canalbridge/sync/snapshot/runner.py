"""The snapshot's thread: each table's chunks planned, read between their signals, and waited on until they land.

For each table, one chunk after the other (a chunk is ``parallelism``
key ranges of ``chunk_rows`` rows, read together):

1. register the chunk's window (:class:`~canalbridge.sync.snapshot.windows.Windows`)
   and write its open signal: from the signal on, the Consumer notes the
   keys of the table's changes it routes;
2. read the chunk's rows (a :class:`ChunkReader`: Spark over JDBC, each
   range on its own connection) and give them to the window;
3. write the close signal, and wait until the transaction that carries the
   chunk has landed in the target, with the table's progress (a DDL on the
   table while the window was open spoils it: the chunk is read again);
4. forget the window, drop the read rows and the signal rows.

The next chunk is read (steps 1 and 2) while the one before commits; its
close signal waits until that one landed, so a table's chunks land in key
order.

The open signal is in the binlog once its INSERT returns (autocommit), so
the read may start at once: every change the read can miss comes after
the signal in the stream. The progress each chunk lands with is where a
restart goes on (:mod:`canalbridge.sync.snapshot.progress`).

A source that goes away (a restart, a lost connection) is tried again with
the job's reconnect back-off: a chunk whose close signal is out still lands
(the stream carries its signal), the one being read is dropped, and once the
source answers the snapshot goes on after the last chunk that landed. Only
when the attempts run out does the job pause.

A table whose snapshot cannot go on (its key or a back-fill's column
dropped, a read the server refuses) is *parked*: its status says why and
what to do, its stream goes on, and so do the other tables' snapshots. A
table dropped is *gone*. A table renamed under a job that follows renames
is read on under its new name: once the stream routed the RENAME (a read
that finds no table first waits until the stream passed the point where it
failed).

Its length: one thread's loop over tables, chunks and windows, whose steps share the runner's state;
the windows, chunking, progress and reconnects it uses are modules of their own.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import structlog

from canalbridge.source_db import (
    CLOSE,
    OPEN,
    ChunkPlanner,
    KeyRange,
    Signal,
    SignalTable,
    SourceDb,
    SourceDbAccessError,
    SourceDbConnectionError,
    SourceDbError,
    TableKey,
    TableKeyError,
    table_columns,
    table_key,
    table_rows_estimate,
)
from canalbridge.sync.errors import SnapshotError, Stopping, SyncError, first_line
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.settings import ChannelSettings, RetrySettings, SnapshotSettings
from canalbridge.sync.snapshot.board import WAITING, TableBoard
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, SnapshotChunk
from canalbridge.sync.snapshot.chunking import ROUTED, groups, key_text, source_columns, span, wait_for, wait_landed
from canalbridge.sync.snapshot.progress import SnapshotStatus, TableProgress, combined
from canalbridge.sync.snapshot.reconnect import run_reconnecting
from canalbridge.sync.snapshot.source import ReaderLostError, ReadRows, SnapshotSource
from canalbridge.sync.snapshot.windows import Windows
from canalbridge.sync.worker import CancellableWorker

log = structlog.get_logger("canalbridge.snapshot")
SPOILED_TRIES = 5  # a table whose windows are spoiled this often in a row, none landing, is parked


@dataclass(frozen=True)
class SnapshotTable:
    """A table to snapshot: ``schema.table``, its channel's ``key`` (None: the primary key), and how far an
    earlier snapshot of it came (None: it never began, or a new one is asked for). ``where``: a checked filter,
    for a new snapshot of only the rows it takes (one that resumes keeps its progress's). ``channel``: for a
    table a rule takes, the channel the rule makes for it (it opens when the stream meets the table, or its
    first chunk). ``rebuild``: its target waits to be made anew (``canalbridge rebuild``): a mark replaces it
    first, and the table's keys are planned only after that mark landed. ``current``: the name the table goes
    by in the source, where its channel followed a RENAME (its progress keeps ``name``)."""

    schema: str
    table: str
    key: tuple[str, ...] | None = None
    progress: TableProgress | None = None
    where: str | None = None
    channel: ChannelSettings | None = None
    rebuild: bool = False
    current: TableId | None = None

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


class SnapshotRunner(CancellableWorker):
    """Runs one job's snapshot of ``tables`` in its own thread, then ends; a failure is reported to the job, and
    its end (every table done, or cancelled) to ``on_finished``.

    With ``announce`` (a snapshot asked for while the job runs, of tables
    whose targets hold a finished one), each table's new progress lands
    first, as an empty chunk: from then on a restart goes on with it.
    ``reconnect``: how a source that went away is tried again (None: not at
    all, the job pauses at once). ``discover``: more tables to snapshot, found
    in the source at the first connection (the tables rules take).

    A table to ``rebuild`` gets a mark in a rebuild window first (with
    those of ``announce``): its channel makes its target anew at the mark's
    close signal and drops the table's changes before it, so the keys are
    planned only once the mark landed (a row written before the close
    signal is read, whatever its key).

    A cancel reads no more: a chunk whose close signal is written still
    lands (only a stop ends the wait for it: its rows are the commit's until
    it lands), the one read ahead of it is dropped, and each table not
    finished then lands a mark that says it is (an empty chunk), so that no
    restart takes the snapshot up again. The thread ends once they landed.
    """

    def __init__(self, job: str, tables: Sequence[SnapshotTable], windows: Windows, source: SnapshotSource,
                 settings: SnapshotSettings, stop: threading.Event, on_failure: Callable[[SyncError], None],
                 on_finished: Callable[[SnapshotRunner], None] | None = None, *, announce: bool = False,
                 reconnect: RetrySettings | None = None,
                 discover: Callable[[SourceDb], Sequence[SnapshotTable]] | None = None) -> None:
        super().__init__(f"snapshot-{job}", stop)
        self.job = job
        self.tables = tuple(tables)
        self.windows = windows
        self.settings = settings
        self._connect = source.connect
        self._reader = source.reader
        self._filters = source.filters
        self._on_failure = on_failure
        self._on_finished = on_finished
        self._announce = announce
        self._discover = discover
        self._reconnect = reconnect or RetrySettings(1, 0.0, 0.0)
        self._current = ""  # the table being read (for errors that do not name it)
        self._landed = 0  # chunks landed in this run: a source lost after some is tried again from the first attempt
        self._log = log.bind(job=job)
        self.snapshot_id = uuid.uuid4().hex[:12]  # of the tables whose snapshot begins in this run
        self.finished = threading.Event()  # every table is done
        # Written by this thread, read by status (each value replaced whole).
        self._board = TableBoard(job, [table.name for table in self.tables])
        self._progress: dict[str, TableProgress] = {}  # each table's, once planned, as its chunks land (this thread's)

    def status(self) -> dict[str, SnapshotStatus]:
        """Each table's snapshot as it stands, by ``schema.table``."""
        return self._board.status()

    def parked(self) -> list[SnapshotTable]:
        """The tables whose snapshot cannot go on in this run (see :meth:`_stuck`)."""
        parked = set(self._board.parked())
        return [table for table in self.tables if table.name in parked]

    def channel_status(self) -> dict[str, SnapshotStatus]:
        """Each channel's snapshot as it stands, by the channel's source: the tables a merged target takes,
        combined."""
        status, by_channel = self._board.status(), dict[str, list[SnapshotStatus]]()
        for table in self.tables:  # (both replaced whole when tables are found: a table not in both waits)
            source = table.channel.source if table.channel is not None else table.name
            by_channel.setdefault(source, []).append(status.get(table.name, WAITING))
        return {source: each[0] if len(each) == 1 else combined(each) for source, each in by_channel.items()}

    def _run(self) -> None:
        try:
            run_reconnecting(self._connected, lambda: self._landed, self._reconnect, self._stop, self._log,
                             lambda: self._current)
        except (_Halted, Stopping):
            pass
        except SourceDbError as exc:
            self._fail(SnapshotError(exc.table or self._current, str(exc)))
        except SnapshotError as exc:
            self._fail(exc)
        except Exception as exc:  # never a thread that ends unseen: the job pauses, naming it
            self._log.exception("snapshot.unexpected_error", table=self._current)
            self._fail(SnapshotError(self._current, f"unexpected {type(exc).__name__}: {exc}"))

    def _connected(self) -> None:
        """One connection's worth of the snapshot: on from each table's last landed chunk to the end (or a
        cancel), or until the source goes away (:class:`SourceDbConnectionError`)."""
        with self._connect() as db:
            signals = SignalTable(db, *self.windows.signal_table)
            signals.check()
            signals.clear()  # (a lost connection's: the windows they opened are dropped)
            try:
                if self._discover is not None:
                    self._take(self._discover(db))
                    self._discover = None  # (a reconnect goes on with the tables taken)
                if self._announce:
                    self._announce_all(db, signals)
                    self._announce = False  # (landed: a reconnect goes on with it)
                self._mark_rebuilds(db, signals)
                for each in self.tables:
                    if self._halted():
                        raise _Halted()
                    if self._board.given_up(each.name):
                        continue  # (parked or gone before a reconnect)
                    self._current = each.name
                    try:
                        self._table(db, signals, each)
                    except (SourceDbError, SnapshotError) as exc:
                        self._stuck(each, exc, signals)
            except _Halted:
                if self._stop.is_set():
                    raise
                self._mark_cancelled(db, signals)
                self._ended()
                return
        parked = self.parked()
        if parked and self.settings.only:  # (the job would end FINISHED without it)
            raise self._board.only_error(parked[0].name)
        self.finished.set()
        self._log.info("snapshot.finished", tables=len(self.tables), parked=[table.name for table in parked])
        self._ended()

    def _stuck(self, table: SnapshotTable, exc: SourceDbError | SnapshotError, signals: SignalTable) -> None:
        """``table``'s snapshot cannot go on for ``exc``: the table is gone (the stream dropped it) or parked,
        unless ``exc`` is the job's (a lost source, the signal table, a stream that does not come through),
        raised again."""
        if isinstance(exc, SourceDbConnectionError):
            raise exc
        if isinstance(exc, SourceDbError):
            if exc.table is not None and exc.table.lower() == ".".join(self.windows.signal_table).lower():
                raise exc
            # A table a rule takes comes and goes (a day's log table); one named for a channel is gone only if
            # the stream dropped it: else it was dropped outside what the stream shows, or the user may not see it.
            if isinstance(exc, SourceDbAccessError) and exc.missing and (
                    table.channel is not None or self._gone_in_stream(signals, table)):
                self._board.gone(table.name, exc.reason)
                return
        elif not isinstance(exc, _TableStuck):
            raise exc
        self._park(table, exc)

    def _park(self, table: SnapshotTable, exc: SourceDbError | SnapshotError) -> None:
        """Leave ``table``'s snapshot where it is, saying why and what to do; the stream and the other tables
        go on (:meth:`TableBoard.park`)."""
        progress = self._progress.get(table.name, table.progress)
        self._board.park(table.name, first_line(exc), done=key_text(None if progress is None else progress.done),
                         rebuild=table.rebuild, backfill=isinstance(exc, _Untrusted),
                         read_error=exc.read_error if isinstance(exc, _TableStuck) else None)

    def _take(self, found: Sequence[SnapshotTable]) -> None:
        """Snapshot ``found`` too, after the tables given (those given already are left out)."""
        known = {table.name.lower() for table in self.tables}
        more = [table for table in found if table.name.lower() not in known]
        if more:
            # Replaced whole: status and a cancel read them from other threads.
            self._board.add(table.name for table in more)
            self.tables = (*self.tables, *more)
        self._log.info("snapshot.tables_found", tables=[table.name for table in more])

    def _ended(self) -> None:
        if self._on_finished is not None:
            self._on_finished(self)

    def _announce_all(self, db: SourceDb, signals: SignalTable) -> None:
        """Plan each table's new snapshot (its last key now) and land that progress, no row yet."""
        for table in self.tables:
            try:
                key = table_key(db, *self._named(table), table.key)
                last = ChunkPlanner(db, key, self.settings.chunk_rows, table.where).last_key()
                progress = TableProgress(self.snapshot_id, table.name, last, key=key.names, where=table.where)
                if progress.where is not None and self._filters is not None:
                    self._filters.remember(self.job, progress)  # (before it can land: a restart reads it back)
                self._land_mark(db, signals, table, key, progress)
            except (SourceDbError, SnapshotError) as exc:
                self._stuck(table, exc, signals)  # (dropped since it was asked for, or its key unusable)
        self._log.info("snapshot.announced", tables=[table.name for table in self.tables])

    def _mark_rebuilds(self, db: SourceDb, signals: SignalTable) -> None:
        """Land the mark of each table to rebuild that has none yet: its channel makes the target anew there."""
        for table in self.tables:
            if not table.rebuild or table.name in self._progress or self._board.given_up(table.name):
                continue  # (a reconnect goes on after the mark that landed)
            try:
                key = table_key(db, *self._named(table), table.key)
                progress = TableProgress(self.snapshot_id, table.name, None, key=key.names, planned=False)
                self._land_mark(db, signals, table, key, progress, replaces=True)
            except (SourceDbError, SnapshotError) as exc:
                self._stuck(table, exc, signals)
                continue
            self._log.info("snapshot.rebuild_marked", table=table.name, key=list(key.names))

    def _mark_cancelled(self, db: SourceDb, signals: SignalTable) -> None:
        """Land a mark (no row, the progress finished) for each table not finished: the one being read and
        those not begun, each with the progress it had (its snapshot, a back-fill's condition). A table whose
        mark cannot land (its key cannot be read) is left: a restart takes it up, and says what fails. So is a
        table to rebuild: its target, made anew, would keep only what the stream wrote."""
        cancelled = []
        for table in self.tables:
            progress = self._progress.get(table.name, table.progress)
            if progress is not None and progress.finished and not table.rebuild:
                continue
            if table.rebuild:
                self._log.warning("snapshot.cancel_skipped", table=table.name,
                                  reason="its target is made anew: the next start reads it")
                continue
            before = self._board[table.name]
            try:
                named = self._named(table)
                try:
                    key = table_key(db, *named, table.key)
                except TableKeyError:  # (parked for it: a mark needs no key, and one read again plans anew)
                    key = TableKey(*named, ())
                if progress is None or (progress.key and progress.key != key.names):
                    progress = TableProgress(self.snapshot_id, table.name, None, key=key.names, where=table.where)
                self._land_mark(db, signals, table, key,
                                progress if progress.last is None else progress.advanced(progress.last))
            except SourceDbError as exc:
                self._log.warning("snapshot.cancel_unmarked", table=table.name, error=str(exc))
                # (This run reads it no more either way; unmarked, the next start takes it up.)
                gone = isinstance(exc, SourceDbAccessError) and exc.missing and table.channel is not None
                self._board.set(table.name, replace(before, phase="gone" if gone else "cancelled", seconds_left=None))
                continue
            cancelled.append(table.name)
            self._board.set(table.name, replace(before, phase="cancelled", done=key_text(progress.done),
                                                last=key_text(progress.last), seconds_left=None))
        self._log.warning("snapshot.cancelled", tables=cancelled)

    def _land_mark(self, db: SourceDb, signals: SignalTable, table: SnapshotTable, key: TableKey,
                   progress: TableProgress, *, replaces: bool = False) -> None:
        """Land ``progress`` in the table's target with no row (read nothing between its signals); ``replaces``:
        in a rebuild window."""
        for _ in range(2):  # (a DDL spoiled it: once more, as the table is now)
            read = self._read(db, signals, table, key, [], progress, replaces=replaces)
            try:
                self._close(signals, read)
            except SourceDbConnectionError:
                # A close whose write failed may have reached the server: if the stream met it, the mark is in a
                # transaction (a rebuild's channel acts on it), and lands; a reconnect goes on after it.
                if read.closing and not self.windows.withdraw(read.window):
                    self._settle(table, read, _Tally())
                else:
                    self._drop(read)
                raise
            except BaseException:
                self._drop(read)  # (a mark landed twice, were its signal out after all, says the same)
                raise
            if self._land(signals, table, read, _Tally()):
                return
        raise _TableStuck(table.name, "a mark of its snapshot's progress was spoiled twice by DDL on the table")

    def _fail(self, error: SnapshotError) -> None:
        if self._discover is not None and not self.tables and not self.settings.only:
            # Only looking for the tables the patterns take, none found yet: the stream goes on as it did before
            # patterns were snapshotted, and the next start looks again.
            self._log.warning("snapshot.tables_not_found", error=str(error),
                              note="the tables the patterns take are looked for again at the next start")
            return
        self._log.error("snapshot.failed", table=error.table, error=str(error))
        self._on_failure(error)

    def _table(self, db: SourceDb, signals: SignalTable, table: SnapshotTable) -> None:
        # What landed in this run first (a reconnect goes on after it), else what the target held at the start.
        progress = self._progress.get(table.name, table.progress)
        if (progress is table.progress and progress is not None and progress.where is not None
                and self._filters is not None and not self._filters.knows(self.job, progress)):
            # (Read back from the target, where anyone who can commit to it can write it: not run on the source.)
            raise _Untrusted(table.name, f"the back-fill's condition its target holds ({progress.where!r}) is not "
                                         "one this daemon's state store says a user asked for, so it is not run")
        tally, first = _Tally(), True
        spoils, landed_before = 0, 0  # windows spoiled in a row, and the chunks landed at the last
        where = progress.where if progress is not None else table.where
        while True:
            named = self._named(table)
            try:
                key = table_key(db, *named, table.key)
            except SourceDbAccessError as exc:
                if not exc.missing or not self._moved_since(signals, table, named):
                    raise
                continue  # (renamed, the job following it: planned again under its new name)
            planner = ChunkPlanner(db, key, self.settings.chunk_rows, where)
            if progress is not None and progress.key and progress.key != key.names:
                self._log.warning("snapshot.key_changed", table=table.name, was=list(progress.key),
                                  now=list(key.names))
                progress = None  # its key values are another key's: the table's snapshot starts over
            if progress is None or not progress.planned:  # (a rebuild's: planned once its mark landed)
                progress = TableProgress(self.snapshot_id if progress is None else progress.snapshot, table.name,
                                         planner.last_key(), key=key.names, where=where)
            self._progress[table.name] = progress
            if progress.finished:
                self._board.set(table.name, SnapshotStatus("finished", last=key_text(progress.last)))
                self._log.info("snapshot.table_done_already", table=table.name, snapshot=progress.snapshot)
                return
            if first:
                # The server's estimate of the table, for the time left: not of a back-fill's rows.
                tally.estimate = table_rows_estimate(db, key.schema, key.table) if where is None else None
                self._log.info("snapshot.table_started", table=table.name, snapshot=progress.snapshot,
                               resumed=progress.done is not None, where=where, rows_estimate=tally.estimate)
                first = False
            self._board.set(table.name, SnapshotStatus("reading", tally.chunks, tally.rows, key_text(progress.done),
                                                       key_text(progress.last), rows_done=progress.rows,
                                                       rows_estimate=tally.estimate))
            try:
                spoiled = self._chunks(db, signals, table, key, planner, progress, tally)
            except SourceDbAccessError as exc:
                if not exc.missing or not self._moved_since(signals, table, named):
                    raise
                progress = self._progress[table.name]  # (on from the last chunk that landed, under its new name)
                continue
            if spoiled is None:
                break
            # A DDL on the table came while a chunk was read: on from the last chunk that landed, as the table
            # is now (and from the start if its key changed). Not for ever without a chunk landing.
            spoils = spoils + 1 if tally.chunks == landed_before else 1
            if spoils >= SPOILED_TRIES:
                raise _TableStuck(table.name, f"its chunk after key {key_text(spoiled.done)!r} was read {spoils} "
                                              "times in a row, each spoiled before it landed (DDL on the table, "
                                              "a RENAME, or no channel takes it)")
            landed_before = tally.chunks
            progress = spoiled
        self._log.info("snapshot.table_finished", table=table.name, snapshot=progress.snapshot, chunks=tally.chunks,
                       rows=tally.rows)

    def _named(self, table: SnapshotTable) -> TableId:
        """The name ``table`` goes by in the source now (a RENAME the job follows moves it)."""
        return self.windows.current(table.current or TableId(table.schema, table.table))

    def _moved_since(self, signals: SignalTable, table: SnapshotTable, named: TableId) -> bool:
        """``table`` is not in the source under ``named``: whether a RENAME the job follows moved it, once the
        stream routed everything written before now (the read may have failed before the RENAME was routed)."""
        self._caught_up(signals, table)
        moved = self._named(table)
        if moved == named:
            return False
        self._log.info("snapshot.table_renamed", table=table.name, old=".".join(named), new=".".join(moved))
        return True

    def _gone_in_stream(self, signals: SignalTable, table: SnapshotTable) -> bool:
        """Whether the stream dropped ``table`` (or renamed it away, the job not following), once it routed
        everything written before now."""
        self._caught_up(signals, table)
        return self.windows.gone(self._named(table))

    def _caught_up(self, signals: SignalTable, table: SnapshotTable) -> None:
        """Until the stream routed everything written before now: a probe's open signal (a window of no table's
        rows), met in the stream."""
        probe = ChunkWindow(f"{self.snapshot_id}-{uuid.uuid4().hex[:8]}", self.windows.signal_table, (),
                            applies=False)
        self.windows.register(probe)
        try:
            signals.write(Signal(probe.id, OPEN, {"probe": table.name}))
            if wait_for(self.windows, probe, ROUTED, self.settings.land_timeout_seconds, self._stop.is_set) is None:
                raise _Halted()
        finally:
            self.windows.forget(probe)
        signals.remove(probe.id)

    def _chunks(self, db: SourceDb, signals: SignalTable, table: SnapshotTable, key: TableKey,
                planner: ChunkPlanner, progress: TableProgress, tally: _Tally) -> TableProgress | None:
        """Read and land the table's chunks after ``progress``, each read while the one before it commits; None
        once all landed, or the progress of the last that landed if a DDL spoiled a window (the rest is read
        again).

        A chunk's close signal is written only once the chunk before it landed: a table's chunks land in
        key order, so the progress each lands with has no hole behind it.
        """
        held: list[_Read] = []  # read and not dropped yet, in key order: the last one's close signal is not written
        landed = progress
        try:
            for ranges in groups(planner.ranges(progress.done, progress.last), self.settings.parallelism):
                through = ranges[-1].through
                assert through is not None  # (the planner bounds every range by the last key)
                progress = progress.advanced(through)
                if self._halted():  # (not one more read: it may take long)
                    raise _Halted()
                held.append(self._read(db, signals, table, key, ranges, progress))
                progress = held[-1].progress  # (with the chunk's rows counted)
                if len(held) == 2:  # the one before was closed, and committed while this one was read
                    if not self._land(signals, table, before := held.pop(0), tally):
                        return landed
                    landed = before.progress
                if self._halted():  # (a cancel during the read: this chunk is not closed, and is dropped)
                    raise _Halted()
                self._close(signals, held[-1])
            if held and not self._land(signals, table, held.pop(0), tally):
                return landed
            return None
        except SourceDbConnectionError:
            # The source went away: a chunk whose close signal is out lands still (the stream carries the
            # signal), so that a reconnect goes on after it rather than reading it twice. A close whose write
            # failed may have reached the server all the same: the chunk is withdrawn unless the stream met it.
            for read in list(held):
                if read.closed or (read.closing and not self.windows.withdraw(read.window)):
                    held.remove(read)
                    self._settle(table, read, tally)
            raise
        except (_Halted, SourceDbError, SnapshotError):
            # A cancel, or the table parked: no more is read, but a chunk whose close signal is out is in the
            # stream's open transaction: it lands (only a stop ends the wait), and its rows are dropped only then.
            if not self._stop.is_set():
                for read in [read for read in held if read.closed]:
                    held.remove(read)
                    self._land(signals, table, read, tally)
            raise
        finally:
            for read in held:  # (a stop, a failure, a spoiled window: what the target holds is where to go on)
                self._drop(read)

    def _read(self, db: SourceDb, signals: SignalTable, table: SnapshotTable, key: TableKey,
              ranges: Sequence[KeyRange], progress: TableProgress, *, replaces: bool = False) -> _Read:
        """Open a window for ``ranges`` and read them; their close signal is for :meth:`_close`."""
        # The table as the server spells it, which the binlog's headers do.
        whole = KeyRange(ranges[0].after, ranges[-1].through) if ranges else None
        window = ChunkWindow(f"{progress.snapshot}-{uuid.uuid4().hex[:8]}", TableId(key.schema, key.table), key.names,
                             replaces=replaces, span=whole)
        self.windows.register(window)
        read = _Read(window, progress)
        started = time.monotonic()
        try:
            signals.write(Signal(window.id, OPEN, {"table": table.name}))
            # The columns as of the open signal: a DDL before it is in them, one after it spoils the window.
            columns = source_columns(table_columns(db, key.schema, key.table), key)
            try:
                read.rows = self._reader.read(key, columns, ranges, progress.where)
            except Exception as exc:  # the reader's own errors (Spark's, the driver's) say what failed
                said = f"reading keys {span(ranges)} failed: {first_line(exc)}"
                # The source, or the reader's engine, went away under the read: tried again, as a lost
                # connection is.
                if isinstance(exc, ReaderLostError) or _gone(db):
                    raise SourceDbConnectionError(said, address=db.address, table=table.name) from exc
                table_columns(db, key.schema, key.table)  # (a table dropped under the read is gone, as before it)
                raise _TableStuck(table.name, said, read_error=first_line(exc)) from exc
        except BaseException:
            self._drop(read)
            raise
        read.read_s = time.monotonic() - started
        read.progress = replace(progress, rows=progress.rows + read.rows.count)
        handle, reader = read.rows.handle, self._reader
        held = (lambda: reader.holds(handle)) if read.rows.count else _nothing_to_lose
        self.windows.ready(window, SnapshotChunk(columns, handle, read.rows.count, read.progress, whole, held))
        return read

    def _close(self, signals: SignalTable, read: _Read) -> None:
        """Write ``read``'s close signal: the Consumer hands its chunk to the table's channel there."""
        read.closing = True
        signals.write(Signal(read.window.id, CLOSE, {}))
        read.closed = True

    def _land(self, signals: SignalTable, table: SnapshotTable, read: _Read, tally: _Tally) -> bool:
        """Wait until ``read``'s chunk landed (True) or a DDL spoiled its window (False), then drop it and its
        signal rows."""
        landed = self._settle(table, read, tally)
        signals.remove(read.window.id)
        return landed

    def _settle(self, table: SnapshotTable, read: _Read, tally: _Tally) -> bool:
        """Wait until ``read``'s chunk landed (True: the table's progress is its) or a DDL spoiled its window
        (False), then drop it."""
        assert read.rows is not None
        count, started = read.rows.count, time.monotonic()
        try:
            landed = self._wait(read.window)
        finally:
            self._drop(read)
        if not landed:
            if read.window.lost:  # (its rows went with a Spark JVM or executor: read again, not added again)
                self._log.warning("snapshot.chunk_lost", table=table.name, window=read.window.id)
            else:
                self._log.info("snapshot.chunk_spoiled", table=table.name, window=read.window.id)
            return False
        self._log.info("snapshot.chunk_landed", table=table.name, window=read.window.id, rows=count,
                       through=repr(read.progress.done), read_s=round(read.read_s, 2),
                       waited_s=round(time.monotonic() - started, 2))
        tally.chunks += 1
        tally.rows += count
        self._landed += 1
        progress = self._progress[table.name] = read.progress
        rate = tally.rows / max(time.monotonic() - tally.started, 1e-3)
        left = None if progress.finished or tally.estimate is None else max(tally.estimate - progress.rows, 0) / rate
        self._board.set(table.name, SnapshotStatus(
            "finished" if progress.finished else "reading", tally.chunks, tally.rows, key_text(progress.done),
            key_text(progress.last), round(rate, 1), progress.rows, tally.estimate,
            None if left is None else round(left, 1)))
        return True

    def _drop(self, read: _Read) -> None:
        """Forget ``read``'s window and its rows (its signal rows go at :meth:`_land`, or when the next run
        begins)."""
        self.windows.forget(read.window)
        if read.rows is not None:
            self._reader.release(read.rows.handle)
            read.rows = None

    def _wait(self, window: ChunkWindow) -> bool:
        """Until ``window``'s chunk landed (True) or a DDL spoiled it (False); :class:`SnapshotError` past
        ``land_timeout_seconds``. Only a stop ends it, not a cancel: the chunk's close signal is out."""
        landed = wait_landed(self.windows, window, self.settings.land_timeout_seconds, self._stop.is_set)
        if landed is None:
            raise _Halted()
        return landed


@dataclass
class _Read:
    """A chunk's window and, once read, its rows (None once dropped)."""

    window: ChunkWindow
    progress: TableProgress  # the table's once the chunk landed
    rows: ReadRows | None = None
    read_s: float = 0.0  # how long the read took
    closing: bool = False  # its close signal's write began (the server may have it, whatever the write says)
    closed: bool = False  # its close signal is written: the chunk lands unless a DDL spoils it


@dataclass
class _Tally:
    """A table's chunks and rows landed in this run, since ``started``."""

    started: float = field(default_factory=time.monotonic)
    chunks: int = 0
    rows: int = 0
    estimate: int | None = None  # the server's estimate of the table's rows


def _nothing_to_lose() -> bool:
    return True  # (a chunk of no row: a mark, or a range the source had no row in)


def _gone(db: SourceDb) -> bool:
    """Whether the source went away (a read's failure is then a lost connection, not the read's own)."""
    try:
        db.query("SELECT 1")
    except SourceDbConnectionError:
        return True
    except SourceDbError:
        return False
    return False


class _TableStuck(SnapshotError):
    """A table's own snapshot cannot go on (a read the server refuses, DDL that spoils its marks): the table is
    parked, the others go on. ``read_error``: the reader's own words, for a read that failed."""

    def __init__(self, table: str, message: str, *, read_error: str | None = None) -> None:
        super().__init__(table, message)
        self.read_error = read_error


class _Untrusted(_TableStuck):
    """A back-fill's condition read back from a target that no user asked this daemon for."""


class _Halted(Exception):
    """The snapshot halted between chunks, for a cancel or the job's stop (unlike :class:`Stopping`, which only
    a stopping job raises): its progress is what the target holds."""
