"""``canalbridge verify``: each target compared with its source, chunk by chunk, while the stream runs.

For each chunk of a table (its key ranges, planned as a snapshot plans them):

1. register a *verify* window and write its open signal: from then on the
   Consumer notes the keys of the table's changes it routes;
2. read the chunk's rows from the source (the snapshot's reader);
3. write the close signal, and wait until the transaction that routes it
   has landed: the target then holds every change the source made before
   the read;
4. compare the target, as it is then, with the rows read (the
   :class:`TargetComparer`), leaving out the keys the window noted: a row
   changed after the open signal may have been read on either side of the
   change, and the target may hold the change or not yet. Every other key
   is one the stream left alone since the open signal, so its row in the
   target must equal its row in the source;
5. forget the window and drop the read rows.

Nothing is written to the target. A chunk with differences is reported with
the condition that repairs it: ``canalbridge snapshot JOB TABLE --where
CONDITION`` takes those keys again. A last chunk takes every key above the
last one planned (every key of a table that was empty): the rows written
since the table's check began, and target rows the source does not have.
"""

from __future__ import annotations

import functools
import itertools
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import structlog

from canalbridge.source_db import (
    CLOSE,
    OPEN,
    ChunkPlanner,
    KeyRange,
    Signal,
    SignalTable,
    SourceDb,
    SourceDbError,
    TableKey,
    chunk_predicate,
    table_columns,
    table_key,
)
from canalbridge.source_db.chunks import KeyValues
from canalbridge.sync.errors import SnapshotError, first_line
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.settings import ChannelSettings, SnapshotSettings
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, WindowState
from canalbridge.sync.snapshot.chunking import groups, key_text, source_columns, span, wait_landed
from canalbridge.sync.snapshot.source import Differing, ReadRows, SnapshotSource, TargetComparer
from canalbridge.sync.snapshot.windows import Windows
from canalbridge.sync.worker import CancellableWorker

log = structlog.get_logger("canalbridge.verify")

SPOILED_TRIES = 3  # a chunk whose window DDL spoils this often in a row fails its table
SAMPLE_KEYS = 10  # differing keys shown per chunk
UNTOLD = ("failed", "stopped", "cancelled")  # a table's check ended without telling whether it is equal
ENDED = ("equal", "differs", *UNTOLD)  # a table's check's last phases


@dataclass(frozen=True)
class Difference:
    """A chunk whose keys ``after`` (exclusive) through ``through`` differ in ``keys`` keys (some in
    ``sample``); ``where`` takes the chunk's rows (``canalbridge snapshot --where`` repairs them)."""

    after: str | None
    through: str | None
    keys: int
    sample: tuple[str, ...]
    where: str


@dataclass(frozen=True)
class TableCheck:
    """A table's check in the verify ``verify_id`` as it stands: ``phase`` is ``waiting``, ``checking``,
    ``equal``, ``differs``, ``failed`` (``error`` says why), ``stopped`` (the job stopped first) or
    ``cancelled``; ``chunks`` and ``rows`` compared (the differences found before a stop or a cancel stay)."""

    verify_id: str
    phase: str
    chunks: int = 0
    rows: int = 0
    differences: tuple[Difference, ...] = ()
    error: str | None = None

    @property
    def ended(self) -> bool:
        return self.phase in ENDED


@dataclass(frozen=True)
class VerifyTable:
    """A table to verify: ``schema.table``, its channel's ``key`` (None: the primary key) and ``target``;
    ``channel``: for a table a pattern takes, the channel the pattern makes for it (status shows the check there
    even when the stream has not opened it)."""

    schema: str
    table: str
    target: str
    key: tuple[str, ...] | None = None
    channel: ChannelSettings | None = None

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


class VerifyRunner(CancellableWorker):
    """Verifies ``tables`` one after the other in its own thread, then ends. A failure fails its table, not the
    job: nothing was written. A cancel compares no more: a comparison in flight finishes, the chunk being read
    or waited for is dropped (a verify writes nothing), and every table not done ends ``cancelled``; the thread
    ends once a read in flight returns."""

    def __init__(self, job: str, tables: Sequence[VerifyTable], windows: Windows, source: SnapshotSource,
                 settings: SnapshotSettings, stop: threading.Event) -> None:
        super().__init__(f"verify-{job}", stop)
        if source.comparer is None:
            raise ValueError("a verify needs a comparer of the targets")
        self.tables = tuple(tables)
        self.windows = windows
        self.settings = settings
        self._connect = source.connect
        self._reader = source.reader
        self._comparer: TargetComparer = source.comparer
        self._log = log.bind(job=job)
        self.ended = threading.Event()  # every table's check ended (set before the thread itself ends)
        self.verify_id = uuid.uuid4().hex[:12]
        # Written by this thread, read by status (each value replaced whole).
        self._checks: dict[str, TableCheck] = {table.name: TableCheck(self.verify_id, "waiting")
                                               for table in self.tables}

    def checks(self) -> dict[str, TableCheck]:
        """Each table's check as it stands, by ``schema.table``."""
        return dict(self._checks)

    @property
    def running(self) -> bool:
        """Whether its checks have not all ended (the thread itself ends just after)."""
        return not self.ended.is_set()

    def _run(self) -> None:
        try:
            with self._connect() as db:
                signals = SignalTable(db, *self.windows.signal_table)
                signals.check()
                for table in self.tables:
                    if self._halted():
                        break
                    self._table(db, signals, table)
        except SourceDbError as exc:  # (the connection itself: every table not checked fails with it)
            for table in self.tables:
                if not self._checks[table.name].ended:
                    self._checks[table.name] = replace(self._checks[table.name], phase="failed", error=str(exc))
        finally:
            halt = "cancelled" if self.cancelled else "stopped"
            for table in self.tables:
                if not self._checks[table.name].ended:
                    self._checks[table.name] = replace(self._checks[table.name], phase=halt)
            self._log.info("verify.ended", tables={name: check.phase for name, check in self._checks.items()})
            self.ended.set()

    def _table(self, db: SourceDb, signals: SignalTable, table: VerifyTable) -> None:
        check = self._checks[table.name] = TableCheck(self.verify_id, "checking")
        self._log.info("verify.table_started", table=table.name, target=table.target)
        try:
            key = table_key(db, table.schema, table.table, table.key)
            planner = ChunkPlanner(db, key, self.settings.chunk_rows)
            last = planner.last_key()
            # Then the keys above the last one (all of them when the table was empty): the rows written since
            # the check began, and rows the target holds that the source does not. They are planned again once
            # the planned ones are done, in chunks up to the last key then, so that only the rows written after
            # that are read as one open range.
            for ranges in itertools.chain(groups(planner.ranges(None, last), self.settings.parallelism),
                                          self._tail(planner, last)):
                whole = KeyRange(ranges[0].after, ranges[-1].through)
                found, rows = self._chunk(db, signals, table, key, ranges)
                if found is None:
                    return  # (the job stops, or the verify is cancelled)
                differences = check.differences
                if found.keys:
                    differences += (Difference(key_text(whole.after), key_text(whole.through), found.keys,
                                               found.sample, chunk_predicate(key.columns, whole)),)
                    self._log.warning("verify.chunk_differs", table=table.name, keys=found.keys,
                                      after=key_text(whole.after), through=key_text(whole.through))
                check = self._checks[table.name] = replace(check, chunks=check.chunks + 1, rows=check.rows + rows,
                                                           differences=differences)
        except (SourceDbError, SnapshotError) as exc:
            self._checks[table.name] = replace(check, phase="failed", error=str(exc))
            self._log.error("verify.table_failed", table=table.name, error=str(exc))
            return
        except Exception as exc:  # never a check that ends unseen: the table fails, naming it
            self._checks[table.name] = replace(check, phase="failed", error=f"unexpected {type(exc).__name__}: "
                                                                            f"{first_line(exc)}")
            self._log.exception("verify.unexpected_error", table=table.name)
            return
        self._checks[table.name] = replace(check, phase="differs" if check.differences else "equal")
        self._log.info("verify.table_done", table=table.name, chunks=check.chunks, rows=check.rows,
                       differing_chunks=len(check.differences))

    def _tail(self, planner: ChunkPlanner, last: KeyValues | None) -> Iterator[list[KeyRange]]:
        """The keys above ``last``: the chunks up to the table's last key now, then one range with no bound."""
        newest = planner.last_key()
        if newest is not None and newest != last:
            yield from groups(planner.ranges(last, newest), self.settings.parallelism)
            last = newest
        yield [KeyRange(last, None)]

    def _chunk(self, db: SourceDb, signals: SignalTable, table: VerifyTable, key: TableKey,
               ranges: Sequence[KeyRange]) -> tuple[Differing | None, int]:
        """Compare the chunk of ``ranges``: what differs and the rows read (None: the job stops, or a cancel)."""
        for _ in range(SPOILED_TRIES):
            if self._halted():  # (not one more read)
                return None, 0
            window = ChunkWindow(f"{self.verify_id}-{uuid.uuid4().hex[:8]}", TableId(key.schema, key.table), key.names,
                                 applies=False)
            self.windows.register(window)
            read: ReadRows | None = None
            try:
                signals.write(Signal(window.id, OPEN, {"table": table.name, "verify": True}))
                columns = source_columns(table_columns(db, key.schema, key.table), key)
                if self._halted():  # (a cancel while the signal was written: no read for nothing)
                    return None, 0
                try:
                    read = self._reader.read(key, columns, ranges)
                except Exception as exc:  # the reader's own errors (Spark's, the driver's) say what failed
                    raise SnapshotError(table.name, f"reading keys {span(ranges)} failed: {first_line(exc)}") from exc
                if self._halted():
                    return None, 0
                signals.write(Signal(window.id, CLOSE, {}))
                landed = wait_landed(self.windows, window, self.settings.land_timeout_seconds, self._halted)
                if landed is None:
                    return None, 0
                if landed:
                    try:
                        found = self._comparer.differing(table.target, key, columns, ranges, read.handle,
                                                         functools.partial(self.windows.keys, window), SAMPLE_KEYS)
                    except Exception as exc:
                        raise SnapshotError(table.name, f"comparing keys {span(ranges)} with {table.target} "
                                                        f"failed: {first_line(exc)}") from exc
                    if window.state is not WindowState.SPOILED:  # (a DDL during the comparison: again)
                        return found, read.count
            finally:
                self.windows.forget(window)
                if read is not None:
                    self._reader.release(read.handle)
                signals.remove(window.id)
            self._log.info("verify.chunk_spoiled", table=table.name, window=window.id)
        raise SnapshotError(table.name, f"keys {span(ranges)}: DDL on the table came during {SPOILED_TRIES} "
                                        f"comparisons in a row; verify it once the schema changes are done")
