"""A channel: one source table into one target, with a thread that stages and one that commits.

The Consumer hands a channel the raw row changes of its table
(:meth:`Channel.add`); the channel's thread decodes and maps them and sends
them to the writer in chunks while the transaction is still open, so that
a commit only has to flush the tail and apply. At a commit it seals the
writer's transaction and hands it to the channel's committer thread, which
applies it while the first thread goes on staging the next transaction:
commits overlap reading. (The Consumer lets one commit run at a time, so a
channel holds at most one sealed transaction besides its open one.) A writer that decodes
RowChange bytes itself (the Spark writer, with the JVM decoder) gets them
undecoded: Python then reads only DDLs and the rows that teach it the
table's columns. Work reaches the thread
through a bounded queue, which also holds the Consumer back when the
writer is slower than Canal.

Every wait on a channel has a bound: the Consumer waits for the queue and
for a commit at most ``stall_timeout_s`` (``commit_timeout_seconds``), then
raises :class:`ChannelStuckError`; it stops waiting at once when the job
stops. The thread itself ends when the job stops, after the item in hand:
a commit that hangs in the target keeps it, and the job reports it stuck.

A DDL on the channel's table that changes its columns splits the
transaction's work into steps, applied in stream order by the committer
thread: the rows before it (stamped with the last of their positions), the
schema change (stamped with the DDL's), the rows after it. Each step is
atomic in the target, so a crash between two leaves a position that the
replay resumes from exactly; so is a TRUNCATE when the job applies them.
MySQL commits around a DDL, so these steps meet at source transaction
boundaries. Rows of another column layout (shards of a merged target on
either side of an ALTER) also start a step, possibly in the middle of a
source transaction: such rows steps in a row are held by the writer and
published together, so no reader sees one without the others. Only the
last step that writes carries the commit's label, so a read-back that finds
the label knows the whole commit landed.
DDLs that change no column, and those about the table as a whole (TRUNCATE
by default, RENAME, DROP, CREATE), are logged and skipped; so are column
changes on a channel with an explicit ``columns`` list, whose next row must
then fit the list.

After a commit, once its schedule says so, the committer thread runs the
target's maintenance (:mod:`canalbridge.sync.maintenance`) before it applies
the next transaction. Waits on the channel are then bounded by the maintenance's own
``timeout_seconds``, and by the stall timeout again from its end.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import structlog
from google.protobuf.message import DecodeError

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.changes import Alteration, ChangeRow, RawChange, RowBatch
from canalbridge.sync.ddl import (
    ChangeKey,
    RenameTable,
    SchemaChange,
    TableName,
    TruncateTable,
    changes_columns,
    column_aliases,
    columns_after,
    parse_ddl,
)
from canalbridge.sync.errors import (
    ChannelCommitError,
    ChannelStuckError,
    ColumnsChangedError,
    EntryDecodeError,
    SchemaChangeError,
)
from canalbridge.sync.first_pass import Refill
from canalbridge.sync.maintenance import MaintenanceRun, MaintenanceSchedule
from canalbridge.sync.position import EntryPosition, Position, later
from canalbridge.sync.retry import Stopping
from canalbridge.sync.rows import RowMapper
from canalbridge.sync.settings import ChannelSettings, MaintenanceSettings, SchemaSettings
from canalbridge.sync.writer import ChannelWriter, SealedTransaction

log = structlog.get_logger("canalbridge.channel")

SEND_EVERY_ENTRIES = 256  # raw row changes per chunk handed to the channel thread
QUEUE_CHUNKS = 8  # chunks in flight before the Consumer waits
POLL_S = 0.2  # how often a wait looks at the job's stop event
T = TypeVar("T")
Q = TypeVar("Q")


@dataclass(frozen=True)
class _Begin:
    label: str


class _Pending(NamedTuple):
    """One entry for the channel thread: a DML's or a DDL's RowChange, its rows (``rowsCount``) and its table."""

    position: Position
    row_change: bytes
    dml: bool
    rows: int
    table: tuple[str, str]  # (schema, table): a merged channel's shards, or a followed table's new name


@dataclass(frozen=True)
class _Send:
    changes: list[_Pending]


@dataclass(frozen=True)
class _Commit:
    end_position: Position
    result: Future[bool]


@dataclass(frozen=True)
class _Abort:
    reason: str
    result: Future[None]


@dataclass(frozen=True)
class ReadBack:
    """What a target says after a commit that reported failure: its position (never behind what the channel
    knew), and the label of the transaction whose snapshot carries it."""

    position: Position | None
    label: str | None


@dataclass(frozen=True)
class _ReadPosition:
    result: Future[ReadBack]


@dataclass(frozen=True)
class _Rows:
    """Rows of a transaction sealed before a DDL or rows of another layout (``last`` their last position), or
    at its end (``last`` None)."""

    sealed: SealedTransaction
    last: Position | None


_Step = _Rows | Alteration


@dataclass(frozen=True)
class _Apply:
    """A sealed transaction for the committer thread: its steps, in stream order."""

    steps: tuple[_Step, ...]
    label: str
    rows: int
    commit: _Commit


class Channel:
    """One table's share of every transaction. Methods are called from the Consumer thread."""

    def __init__(self, job: str, settings: ChannelSettings, writer: ChannelWriter, stop: threading.Event,
                 stall_timeout_s: float, *, maintenance: MaintenanceSettings | None = None,
                 schema: SchemaSettings | None = None, debug: bool = False) -> None:
        self.job = job
        self.settings = settings
        self.source = settings.source
        self.writer = writer
        self.debug = debug
        self.committed_position: Position | None = None  # written by the committer thread after start
        self.refill: Refill | None = None  # read at start: a refill an earlier process stopped in
        # The source table's name as the target recorded it once the channel followed a RENAME TABLE, else None:
        # read at start (the router owns the name from there).
        self.source_table: str | None = None
        self.maintenance = maintenance or MaintenanceSettings()  # (what a job without a section gets)
        self.schema = schema or SchemaSettings()
        self.last_maintenance: MaintenanceRun | None = None  # written by the committer thread, for status
        # Counters for metrics (each written by one thread, read anywhere).
        self.entries_received = 0
        self.rows_written = 0
        self._pending: list[_Pending] = []
        self._work: queue.Queue[_Begin | _Send | _Commit | _Abort | _ReadPosition] = queue.Queue(QUEUE_CHUNKS)
        self._stop = stop  # the job's: set when this run stops
        self._stall_timeout_s = stall_timeout_s
        # Written by the committer thread: waits on the channel do not give up before this (monotonic) time.
        self._grace_until = 0.0
        self._maintaining = False
        self._label_sent = ""  # the Consumer's open transaction, for errors raised on its thread
        self._thread: threading.Thread | None = None
        self._committer: threading.Thread | None = None
        # Stager -> committer; the Consumer's one commit at a time bounds what waits here.
        self._sealed: queue.Queue[_Apply | _ReadPosition] = queue.Queue()
        self._log = log.bind(job=job, channel=settings.source)
        # Owned by the channel (staging) thread:
        self._mappers: dict[tuple[str, str], RowMapper] = {}  # by source table: shards map on their own
        self._target_columns: tuple[str, ...] | None = None  # the target's, as the DDLs staged so far leave it
        self._aliases: dict[str, str] = {}  # a shared target's: source names another shard's rename took
        self._mappers_stale = False
        self._layout: object = None  # the column facts of the rows the writer's open transaction holds
        self._raw = False  # the writer decodes RowChange bytes itself (set at start)
        self._label = ""
        self._rows_sent = 0
        self._begun = False  # the writer has an open transaction
        self._steps: list[_Step] = []  # what a DDL in this transaction sealed before it
        self._last_row: Position | None = None  # of the rows sent since the writer's transaction began
        self._last_sent: Position | None = None  # of the last row the writer was sent
        self._failure: BaseException | None = None
        self._schedule = MaintenanceSchedule(self.maintenance, time.monotonic())  # the committer thread's

    # -- lifecycle (Consumer thread / job) --------------------------------------------

    def start(self) -> None:
        """Read the committed position back from the target and start the threads."""
        self.committed_position = self.writer.committed_position()
        behind = self.writer.committed_refill() if self.committed_position is not None else None
        if behind is not None and self.committed_position is not None:
            held = (frozenset(self.writer.changes_held(behind, self.committed_position))
                    if self.settings.keeps_every_change else None)
            self.refill = Refill(behind, self.committed_position, held)
        self.source_table = self.writer.source_table()
        self._target_columns = self.writer.target_columns()
        self._aliases = self.writer.column_aliases()
        # Columns that record a row's source are added in Python: the JVM decoder reads only what Canal sent.
        self._raw = self.writer.decodes_row_changes() and not self.settings.origin_columns
        self._thread = threading.Thread(target=self._run, name=f"channel-{self.job}-{self.source}", daemon=True)
        self._committer = threading.Thread(target=self._run_committer, name=f"committer-{self.job}-{self.source}",
                                           daemon=True)
        self._thread.start()
        self._committer.start()
        self._log.info("channel.started", target=self.settings.target, committed=str(self.committed_position))

    def _mapper(self, table: tuple[str, str]) -> RowMapper:
        """The mapper of one source table (one for a channel of one table), knowing the target as it is now:
        made afresh after an abort (see :meth:`_forget`)."""
        mapper = self._mappers.get(table)
        if mapper is None:
            settings = self.settings
            schema, name = table
            origin = tuple((column, value) for column, value in ((settings.schema_column, schema),
                                                                  (settings.table_column, name)) if column)
            mapper = self._mappers[table] = RowMapper(
                f"{schema}.{name}", settings.columns or self._target_columns, settings.key,
                before_images=self.writer.before_images(), by_name=settings.columns is None, origin=origin,
                origin_in_key=settings.source_in_key, aliases=self._aliases)
        return mapper

    def join(self, timeout_s: float) -> bool:
        """Wait (after the job's stop event was set) for the threads to end; False if one is still busy."""
        deadline = time.monotonic() + timeout_s
        for thread in (self._thread, self._committer):
            if thread is not None:
                thread.join(max(deadline - time.monotonic(), 0.0))
        return not self.alive

    @property
    def layout_note(self) -> str | None:
        """The writer's note on a target layout that slows commits, once it has seen the target."""
        return self.writer.layout_note()

    @property
    def alive(self) -> bool:
        return any(thread is not None and thread.is_alive() for thread in (self._thread, self._committer))

    def await_result(self, future: Future[T], doing: str, since: float | None = None) -> T:
        """The result of ``future``, waiting at most the stall timeout from now (or from ``since``, a
        ``time.monotonic()`` of when the work was handed over); :class:`Stopping` if the job stops."""
        deadline = (time.monotonic() if since is None else since) + self._stall_timeout_s
        while True:
            try:
                return future.result(timeout=POLL_S)
            except FutureTimeout:
                self._check_waiting(deadline, doing)

    # -- transaction (Consumer thread) ----------------------------------------------------

    def begin(self, label: str) -> None:
        self._pending = []
        self._label_sent = label
        self._put(_Begin(label))

    def add(self, position: Position, row_change: bytes, *, table: tuple[str, str], dml: bool = True,
            rows: int = 0) -> None:
        """Queue one ROWDATA entry's row change (or a DDL on this table, ``dml`` False) for this transaction.

        ``rows`` is the entry's ``rowsCount``, what the metrics count when the writer decodes; ``table``
        its (schema, table), as its header names it (a merged channel's shards, a renamed table).
        """
        self._pending.append(_Pending(position, row_change, dml, rows, table))
        self.entries_received += 1
        if len(self._pending) >= SEND_EVERY_ENTRIES:
            self._flush()

    def commit(self, end_position: Position) -> Future[bool]:
        """Flush the tail and commit through ``end_position``; the next transaction may begin at once.

        The future resolves to True when rows were written, False when the
        transaction had none for this table, or raises ChannelCommitError.
        """
        self._flush()
        result: Future[bool] = Future()
        self._put(_Commit(end_position, result))
        return result

    def abort(self, reason: str) -> Future[None]:
        self._pending = []
        result: Future[None] = Future()
        self._put(_Abort(reason, result))
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
        self._put(_ReadPosition(result))
        return result

    def _flush(self) -> None:
        if self._pending:
            self._put(_Send(self._pending))
            self._pending = []

    def _put(self, item: _Begin | _Send | _Commit | _Abort | _ReadPosition) -> None:
        deadline = time.monotonic() + self._stall_timeout_s
        while True:
            try:
                self._work.put(item, timeout=POLL_S)
                return
            except queue.Full:
                self._check_waiting(deadline, "handing work to the channel thread")

    def _check_waiting(self, deadline: float, doing: str) -> None:
        if self._stop.is_set():
            raise Stopping()
        now = time.monotonic()
        if now < deadline or now < self._grace_until:
            return
        if self._maintaining:
            raise ChannelStuckError(self.source, self._label_sent, "the table maintenance",
                                    self.maintenance.timeout_seconds, setting="maintenance.timeout_seconds")
        raise ChannelStuckError(self.source, self._label_sent, doing, self._stall_timeout_s)

    # -- the channel (staging) thread ------------------------------------------------------------

    def _take(self, work: queue.Queue[Q]) -> Q | None:
        """The next item of ``work`` (either thread's queue), or None once the job stops.

        What is still queued then is uncommitted and will be consumed again.
        """
        while not self._stop.is_set():
            try:
                item = work.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if not self._stop.is_set():
                return item
            _drop(item)
        return None

    def _run(self) -> None:
        while (item := self._take(self._work)) is not None:
            if isinstance(item, _Begin):
                self._label, self._rows_sent, self._failure = item.label, 0, None
                self._begun = False
                self._discard_steps("a new transaction began")
            elif isinstance(item, _Send):
                if self._failure is None:
                    try:
                        self._send(item.changes)
                    except Exception as exc:  # reported at commit, which aborts and replays
                        self._failure = exc
                        self._log.warning("channel.send_failed", label=self._label, error=str(exc))
            elif isinstance(item, _Commit):
                self._seal(item)
            elif isinstance(item, _Abort):
                self._abort(item)
            elif isinstance(item, _ReadPosition):
                self._sealed.put(item)
        if self._begun:
            self._abort_writer("job stopping")
        self._discard_steps("job stopping")

    def _send(self, changes: list[_Pending]) -> None:
        """Map (or, for a writer that decodes, pass on) a chunk of entries; a DDL in it is a step of its own.

        A writer that decodes RowChange bytes itself gets them as they are:
        Python then reads only DDLs and the rows that teach it the columns.
        Rows whose column facts differ from those before them in the writer's
        open transaction (shards of a merged channel mid-way through the same
        ALTER) start a step of their own: one transaction holds one layout.
        """
        if self._mappers_stale:  # (it reads the target's columns: a failure here fails the commit, retried)
            self._mappers.clear()
            self._target_columns = self.writer.target_columns()
            self._aliases = self.writer.column_aliases()
            self._mappers_stale = False
        rows: list[ChangeRow] = []
        raw: list[RawChange] = []
        mapper: RowMapper | None = None
        mapped_table: tuple[str, str] | None = None
        for position, data, dml, count, table in changes:
            if table != mapped_table:
                self._send_rows(mapper, rows, raw)  # one batch holds one table's rows
                rows, raw = [], []
                mapper, mapped_table = self._mapper(table), table
            assert mapper is not None
            if not dml:
                self._send_rows(mapper, rows, raw)  # what came before the DDL lands before it
                rows, raw = [], []
                change = self._decode(position, data)
                mapper.map(change, position)  # the mapper names the last DDL if a later row does not fit
                if change.isDdl:
                    self._ddl(change.sql, position, table)
                continue
            if self._raw and mapper.columns is not None:
                raw.append(RawChange(position, data, count))
            else:
                mapped = mapper.map(self._decode(position, data), position)
                if self._raw:
                    if mapped:
                        raw.append(RawChange(position, data, count))
                else:
                    if self.debug:
                        for row in mapped:
                            self._log.debug("channel.row", op=row.kind.value, position=str(position),
                                            values=row.values)
                    rows.extend(mapped)
            self._last_row = position
        self._send_rows(mapper, rows, raw)

    def _send_rows(self, mapper: RowMapper | None, rows: list[ChangeRow], raw: list[RawChange]) -> None:
        if not rows and not raw:
            return
        assert mapper is not None
        batch = mapper.batch(rows) if rows else mapper.raw_batch(raw)
        if self._target_columns is None and self.settings.columns is None:
            self._target_columns = batch.target_columns  # a target the writer creates from these rows
        layout = (batch.target_columns, batch.columns, batch.key_indexes)
        if self._begun and layout != self._layout:
            # Rows of another layout in this transaction (a shard not yet through an ALTER that another
            # went through): those before them become a step of their own, stamped with their last position.
            self._begun = False
            assert self._last_sent is not None
            self._steps.append(_Rows(self.writer.seal(), self._last_sent))
        self._layout = layout
        self._begin_once()
        if isinstance(batch, RowBatch):
            self.writer.send(batch)
            self._rows_sent += len(rows)
        else:
            self.writer.send_raw(batch)
            self._rows_sent += sum(change.rows for change in raw)
        self._last_sent = (rows[-1].position if rows else raw[-1].position)

    def _ddl(self, sql: str, position: Position, table: tuple[str, str]) -> None:
        """A DDL on one of this channel's tables: one that changes the columns (or a TRUNCATE the job applies)
        becomes a step.

        On a merged channel the step is the shared target's: applied where it
        still changes something (the first shard's ALTER adds the column, the
        others find it there), with dropped columns kept (other shards still
        have them), and TRUNCATE never applied (it empties one shard).
        """
        mapper = self._mapper(table)
        ddl = parse_ddl(sql)
        schema, name = table
        if not ddl.understood:
            assert ddl.not_understood is not None
            mapper.unread_ddl(ddl.not_understood)
            self._log.warning("channel.ddl_not_understood", sql=sql, position=str(position),
                              reason=ddl.not_understood, note="the next row must keep the columns as they were")
            return
        shared = self.settings.merged
        follows = self.schema.follows_renames and self.settings.rule is None and not shared
        # A rename is applied (recorded in the target) only where the channel follows it; its new name takes
        # the session's schema, as MySQL reads it.
        changes = tuple(RenameTable(TableName(c.to.schema or schema, c.to.table)) if isinstance(c, RenameTable)
                        else c for c in ddl.changes_for(schema, name) if follows or not isinstance(c, RenameTable))
        if any(isinstance(c, ChangeKey) for c in changes):
            if self.settings.key is not None:
                # Rows are keyed by the configured key: the source's new key only changes their key flags.
                mapper.alter(Alteration(f"{schema}.{name}", sql, (), position))
                changes = tuple(c for c in changes if not isinstance(c, ChangeKey))
                self._log.info("channel.source_key_changed", sql=sql, position=str(position),
                               key=list(self.settings.key), note="the channel keeps its configured key")
            elif shared:
                raise SchemaChangeError(f"{schema}.{name}", sql, position,
                                        "the primary key of one shard of a merged target changed, and the target's "
                                        "key is every shard's: set key for the channel (the columns that identify a "
                                        "row in every shard) and resume")
        applied: tuple[SchemaChange, ...] = tuple(
            c for c in changes
            if (isinstance(c, TruncateTable) and self.schema.applies_truncate and not shared)
            or isinstance(c, RenameTable))
        if changes_columns(changes):
            if self.settings.columns is None:
                applied = changes
            else:
                # The target's names are the list's, not the source's: the next row is checked against
                # the list (and the job pauses, naming this DDL, if it no longer fits).
                self._log.warning("channel.ddl_not_applied", sql=sql, position=str(position),
                                  reason="the channel maps columns by an explicit list")
                return
        if not applied:
            self._log.info("channel.ddl_skipped", sql=sql, position=str(position), table=f"{schema}.{name}",
                           changes=[type(c).__name__ for c in changes] or "none to the columns")
            return
        alteration = Alteration(f"{schema}.{name}", sql, applied, position,
                                self.schema.drop_columns and not shared, shared=shared)
        mapper.alter(alteration)
        if self._target_columns is not None and self.settings.columns is None:
            before = self._target_columns
            self._target_columns = columns_after(before, applied, drop=alteration.drop_columns)
            if shared:  # the other shards' rows keep a renamed column's old name until their own DDL
                self._aliases = column_aliases(self._aliases, before, applied)
            for other in self._mappers.values():
                if other is not mapper:
                    other.retarget(self._target_columns, self._aliases)
        if self._begun:
            self._begun = False
            self._steps.append(_Rows(self.writer.seal(), self._last_row))
        self._steps.append(alteration)

    def _begin_once(self) -> None:
        """Open the writer's transaction before the first rows of this one are sent."""
        if not self._begun:
            self.writer.begin()
            self._begun = True

    def _decode(self, position: Position, raw: bytes) -> entry_pb.RowChange:
        try:
            return entry_pb.RowChange.FromString(raw)
        except DecodeError as exc:
            raise EntryDecodeError(self.source, str(exc), position) from exc

    def _seal(self, item: _Commit) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            self._abort_writer(f"send failed: {failure}")
            self._discard_steps(f"send failed: {failure}")
            self._forget()
            item.result.set_exception(ChannelCommitError(self.source, self._label, failure))
            return
        if self._begun:
            self._begun = False
            self._steps.append(_Rows(self.writer.seal(), None))
        if not self._steps:
            item.result.set_result(False)
            return
        steps, self._steps = tuple(self._steps), []
        self._sealed.put(_Apply(steps, self._label, self._rows_sent, item))

    def _discard_steps(self, reason: str) -> None:
        for step in self._steps:
            if isinstance(step, _Rows):
                step.sealed.discard(reason)
        self._steps = []

    def _forget(self) -> None:
        """After an abort: what the mapper learnt from the dropped entries (a DDL's columns among them) goes.

        The replay starts where the target stands, which may be before a DDL
        the mapper had already taken in.
        """
        self._mappers_stale = True  # built again before the next entry is mapped

    # -- the committer thread ---------------------------------------------------------------------

    def _run_committer(self) -> None:
        while (item := self._take(self._sealed)) is not None:
            if isinstance(item, _Apply):
                self._apply(item)
            else:
                self._read_position(item)
        while True:  # what was sealed and not applied is consumed again: drop its staged rows
            try:
                _drop(self._sealed.get_nowait())
            except queue.Empty:
                break

    def _apply(self, item: _Apply) -> None:
        stamped = self.committed_position  # the last step's stamp, held or published
        # A DDL routed again (Canal's second pass refills up to what the table holds) was applied before. (The
        # rows before a DDL end before it: what the table holds when the DDL's turn comes decides the same.)
        skipped = {index for index, step in enumerate(item.steps) if isinstance(step, Alteration)
                   and stamped is not None and not step.position > stamped}
        # Only the commit's last step that writes carries its label (see read_committed_position).
        writing = [index for index in range(len(item.steps)) if index not in skipped]
        labelled = writing[-1] if writing else None
        for index, step in enumerate(item.steps):
            # Each step is stamped with the last position it holds: the transaction's end for the last
            # one. A commit that fills in what Canal's first pass missed can end before the table's
            # position (see the Consumer): the table still holds everything through that. A Kafka
            # cut carries each partition's mark: the two merge lane by lane.
            last = index == len(item.steps) - 1
            through = item.commit.end_position if last else _through(step)
            position = later(stamped, through)
            # A commit behind the table's position (it fills in what Canal's first pass missed): where it
            # really reached goes with the stamp, for a restart to go on from (see first_pass.Refill).
            behind = through if isinstance(through, EntryPosition) and through != position else None
            label = item.label if index == labelled else f"{item.label}~{index + 1}"
            published = True
            try:
                if isinstance(step, _Rows):
                    # Rows steps in a row may split a source transaction (two layouts in it): held until the
                    # last of them.
                    published = last or not isinstance(item.steps[index + 1], _Rows)
                    step.sealed.apply(position, label, publish=published, behind=behind)
                elif index in skipped:
                    self._log.info("channel.ddl_applied_before", sql=step.sql, position=str(step.position))
                else:
                    self.writer.alter(step, position, label)
                    self._log.info("channel.schema_changed", label=item.label, sql=step.sql,
                                   position=str(step.position))
                    for change in step.changes:
                        if isinstance(change, RenameTable):
                            self._log.info("channel.table_renamed", table=f"{change.to.schema}.{change.to.table}")
            except Exception as exc:
                for rest in item.steps[index + 1:]:
                    _discard(rest, "an earlier step failed")
                if isinstance(exc, ColumnsChangedError):
                    mappers = list(self._mappers.values())
                    mapper = next((m for m in mappers if m.table.lower() == exc.table.lower()),
                                  mappers[0] if len(mappers) == 1 else None)
                    if mapper is not None:
                        exc = mapper.columns_changed(exc.columns, exc.count, exc.position)  # names the last DDL
                self._log.warning("channel.commit_failed", label=item.label, error=_brief(exc))
                item.commit.result.set_exception(ChannelCommitError(self.source, item.label, exc))
                return
            stamped = position
            if published:
                self.committed_position = position
        self.rows_written += item.rows
        self._log.info("channel.committed", label=item.label, rows=item.rows, position=str(self.committed_position))
        item.commit.result.set_result(True)
        if self._schedule.due(time.monotonic()) and not self._stop.is_set():
            self._maintain()

    def _maintain(self) -> None:
        started, started_ms = time.monotonic(), int(time.time() * 1000)
        self._grace_until = started + self.maintenance.timeout_seconds
        self._maintaining = True
        report, error = None, None
        try:
            report = self.writer.maintain(self.maintenance)
        except Exception as exc:  # the sync goes on; the next run tries again
            error = _brief(exc)
        finally:
            ended = time.monotonic()
            self._grace_until = ended + self._stall_timeout_s
            self._maintaining = False
            self._schedule.ran(ended)
        self.last_maintenance = MaintenanceRun(started_ms, ended - started, report, error)
        if report is None:
            self._log.warning("channel.maintenance_failed", error=error, seconds=round(ended - started, 3))
        else:
            self._log.info("channel.maintained", seconds=round(ended - started, 3), **dataclasses.asdict(report))

    def _read_position(self, item: _ReadPosition) -> None:
        try:
            position = self.writer.committed_position()
            label = self.writer.committed_label()
        except Exception as exc:
            item.result.set_exception(ChannelCommitError(self.source, self._label_sent, exc))
            return
        if position is not None and (self.committed_position is None or position > self.committed_position):
            self._log.warning("channel.commit_landed_despite_error", position=str(position))
            self.committed_position = position
        item.result.set_result(ReadBack(self.committed_position, label))

    def _abort(self, item: _Abort) -> None:
        self._failure = None
        if self._begun:
            self._abort_writer(item.reason)
        self._discard_steps(item.reason)
        self._forget()
        item.result.set_result(None)

    def _abort_writer(self, reason: str) -> None:
        self._begun = False
        try:
            self.writer.abort(reason)
        except Exception as exc:  # an abort that fails must not hide the original failure
            self._log.warning("channel.abort_failed", label=self._label, error=str(exc))


def _drop(item: object) -> None:
    """Let go of an item the job stopped before handling: a sealed transaction's staged rows go."""
    if isinstance(item, _Apply):
        for step in item.steps:
            _discard(step, "job stopping")


def _discard(step: _Step, reason: str) -> None:
    if isinstance(step, _Rows):
        step.sealed.discard(reason)


def _through(step: _Step) -> Position:
    """The last position a step that is not its transaction's last holds."""
    if isinstance(step, _Rows):
        assert step.last is not None, "rows sealed before a DDL know their last position"
        return step.last
    return step.position


def _brief(exc: BaseException) -> str:
    """An error's first line, bounded: a Spark error's text can carry the whole JVM stack."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text[:500]
