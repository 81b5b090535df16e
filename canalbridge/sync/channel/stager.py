"""A channel's staging thread: decodes and maps a transaction's entries and sends them to the writer.

The Consumer's entries reach this thread in chunks through the channel's
bounded queue (:class:`Begin`, :class:`Send`, :class:`AddChunk`,
:class:`Commit`, :class:`Abort`). Rows are sent to the writer while the transaction is
open; at a commit the writer's transaction is sealed into steps (rows, and
the schema changes a DDL makes between them: :mod:`canalbridge.sync.schema.target`)
and handed to the committer thread (:mod:`canalbridge.sync.channel.committer`).
A failure while sending is held and reported at the commit, which then
fails: the Consumer aborts and the entries are consumed again.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

import structlog
from google.protobuf.message import DecodeError

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.committer import Committer
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.channel.work import Apply, Committed, ReadPosition, Rows, Step, discard, take
from canalbridge.sync.errors import ChannelCommitError, EntryDecodeError
from canalbridge.sync.model.changes import ChangeRow, RowRun
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.schema.target import TargetSchema
from canalbridge.sync.snapshot.chunk_window import CanalKey, SnapshotChunk


@dataclass(frozen=True)
class Begin:
    label: str


class Statement(NamedTuple):
    """A statement on the channel's table for the staging thread (a DDL), as its RowChange."""

    position: Position
    row_change: bytes
    table: TableId  # (schema, table): a merged channel's shard, or a followed table's old name


@dataclass(frozen=True)
class Send:
    """Entries in stream order: runs of one table's row changes, and statements between them."""

    changes: list[RowRun | Statement]


@dataclass(frozen=True)
class AddChunk:
    """A snapshot chunk of ``table``, at ``position`` in the transaction, without the rows of the ``dropped`` keys
    (Canal's text, by ``key_columns``)."""

    position: Position
    table: TableId
    chunk: SnapshotChunk
    key_columns: tuple[str, ...]
    dropped: frozenset[CanalKey]


@dataclass(frozen=True)
class Commit:
    end_position: Position
    result: Future[Committed]


@dataclass(frozen=True)
class Abort:
    reason: str
    result: Future[None]


Work = Begin | Send | AddChunk | Commit | Abort | ReadPosition


class Stager:
    """The state and work of a channel's staging thread; every field is that thread's."""

    def __init__(self, source: str, sink: ChannelSink, target: TargetSchema, committer: Committer, *,
                 raw: bool, debug: bool, log: structlog.typing.FilteringBoundLogger) -> None:
        self.source = source
        self.writer = sink.writer
        self._state = sink.state  # read again after an abort
        self.debug = debug
        self._target = target
        self._committer = committer
        self._log = log
        self._stale = False  # the target schema is read again before the next entry is mapped
        # A writer that decodes RowChange bytes itself gets them as they are (chosen once).
        self._stage: Callable[[RowMapper, RowRun], None] = self._stage_raw if raw else self._stage_decoded
        self._layout: object = None  # the column facts of the rows the writer's open transaction holds
        self._label = ""
        self._rows_sent = 0
        self._begun = False  # the writer has an open transaction
        self._steps: list[Step] = []  # what a DDL in this transaction sealed before it
        self._last_row: Position | None = None  # of the rows sent since the writer's transaction began
        self._last_sent: Position | None = None  # of the last row the writer was sent
        self._failure: BaseException | None = None

    def run(self, work: queue.Queue[Work], stop: threading.Event) -> None:
        """The thread's body: until the job stops."""
        while (item := take(work, stop)) is not None:
            if isinstance(item, Begin):
                self._label, self._rows_sent, self._failure = item.label, 0, None
                self._begun = False
                self._discard_steps("a new transaction began")
            elif isinstance(item, Send | AddChunk):
                if self._failure is None:
                    try:
                        if isinstance(item, Send):
                            self._send(item.changes)
                        else:
                            self._send_chunk(item)
                    except Exception as exc:  # reported at commit, which aborts and replays
                        self._failure = exc
                        self._log.warning("channel.send_failed", label=self._label, error=str(exc))
            elif isinstance(item, Commit):
                self._seal(item)
            elif isinstance(item, Abort):
                self._abort(item)
            else:
                self._committer.put(item)  # a read-back: after the commits handed over before it
        if self._begun:
            self._abort_writer("job stopping")
        self._discard_steps("job stopping")

    def _send(self, changes: list[RowRun | Statement]) -> None:
        """Stage a chunk of entries: each run of one table's rows as a batch; a DDL in it is a step of its own."""
        self._refresh()
        for item in changes:
            if isinstance(item, RowRun):
                self._stage(self._target.mapper(item.table), item)
                self._last_row = item.last
                continue
            mapper = self._target.mapper(item.table)
            change = self._decode(item.position, item.row_change)
            mapper.map(change, item.position)  # the mapper names the last DDL if a later row does not fit
            if change.isDdl:
                alteration = self._target.ddl(change.sql, item.position, item.table)
                if alteration is not None:
                    self._seal_step(self._last_row)
                    self._steps.append(alteration)

    def _send_chunk(self, item: AddChunk) -> None:
        """Stage a snapshot chunk where the stream has its close signal."""
        self._refresh()
        batch = self._target.mapper(item.table).chunk_batch(item.chunk, item.key_columns, item.dropped, item.position)
        self._open_step(batch.target_columns, (batch.target_columns, batch.columns, batch.key_indexes))
        self.writer.send_chunk(batch)
        self._rows_sent += batch.count
        self._last_row = self._last_sent = item.position
        self._log.info("channel.chunk", label=self._label, rows=batch.count, dropped=len(batch.dropped),
                       position=str(item.position))

    def _refresh(self) -> None:
        if self._stale:  # (it reads the target's columns: a failure here fails the commit, retried)
            state = self._state.read_state()
            self._target.reset(state.columns, state.aliases)
            self._stale = False

    def _stage_decoded(self, mapper: RowMapper, run: RowRun) -> None:
        """Decode and map one table's rows in Python, and send them."""
        rows: list[ChangeRow] = []
        for index, data in enumerate(run.row_changes):
            position = run.position(index)
            mapped = mapper.map(self._decode(position, data), position)
            if self.debug:
                for row in mapped:
                    self._log.debug("channel.row", op=row.kind.value, position=str(position), values=row.values)
            rows.extend(mapped)
        if rows:
            batch = mapper.batch(rows)
            self._open_step(batch.target_columns, (batch.target_columns, batch.columns, batch.key_indexes))
            self.writer.send(batch)
            self._rows_sent += len(rows)
            self._last_sent = rows[-1].position

    def _stage_raw(self, mapper: RowMapper, run: RowRun) -> None:
        """Pass one table's RowChange bytes on to a writer that decodes them; Python decodes a row only until
        the mapper knows the table's columns."""
        skipped: list[int] = []
        index = 0
        while mapper.columns is None and index < len(run):
            position = run.position(index)
            if not mapper.map(self._decode(position, run.row_changes[index]), position):
                skipped.append(index)  # (a change with no rows teaches nothing, and is not sent)
            index += 1
        if skipped:
            run = run.without(skipped)
        if len(run):
            batch = mapper.raw_batch(run)
            self._open_step(batch.target_columns, (batch.target_columns, batch.columns, batch.key_indexes))
            self.writer.send_raw(batch)
            self._rows_sent += sum(run.rows)
            self._last_sent = run.last

    def _open_step(self, target_columns: tuple[str, ...], layout: object) -> None:
        """Open the writer's transaction for a batch of ``layout`` (its column facts). Rows of another layout
        than those before them in the open transaction (shards of a merged channel mid-way through the same
        ALTER) start a step of their own: one transaction holds one layout."""
        self._target.created(target_columns)
        if self._begun and layout != self._layout:
            self._seal_step(self._last_sent)
        self._layout = layout
        if not self._begun:
            self.writer.begin()
            self._begun = True

    def _seal_step(self, last: Position | None) -> None:
        """Seal what the writer's open transaction holds as a step of its own, ending at ``last``."""
        if self._begun:
            self._begun = False
            self._steps.append(Rows(self.writer.seal(), last))

    def _decode(self, position: Position, raw: bytes) -> entry_pb.RowChange:
        try:
            return entry_pb.RowChange.FromString(raw)
        except DecodeError as exc:
            raise EntryDecodeError(self.source, str(exc), position) from exc

    def _seal(self, item: Commit) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            self._abort_writer(f"send failed: {failure}")
            self._discard_steps(f"send failed: {failure}")
            self._stale = True
            item.result.set_exception(ChannelCommitError(self.source, self._label, failure))
            return
        self._seal_step(None)
        if not self._steps:
            item.result.set_result(False)
            return
        steps, self._steps = tuple(self._steps), []
        self._committer.put(Apply(steps, self._label, self._rows_sent, item.end_position, item.result,
                                  self._target.histories()))

    def _discard_steps(self, reason: str) -> None:
        for step in self._steps:
            discard(step, reason)
        self._steps = []

    def _abort(self, item: Abort) -> None:
        self._failure = None
        if self._begun:
            self._abort_writer(item.reason)
        self._discard_steps(item.reason)
        # What the mappers learnt from the dropped entries (a DDL's columns among them) goes: the replay
        # starts where the target stands, which may be before a DDL they had taken in.
        self._stale = True
        item.result.set_result(None)

    def _abort_writer(self, reason: str) -> None:
        self._begun = False
        try:
            self.writer.abort(reason)
        except Exception as exc:  # an abort that fails must not hide the original failure
            self._log.warning("channel.abort_failed", label=self._label, error=str(exc))
