"""A channel's committer thread: applies sealed transactions step by step, and maintains the target.

The channel's staging thread seals a transaction into steps (rows, and the
schema changes between them) and hands it here (:class:`Apply`); this
thread applies it while the next transaction is staged. Each step is
atomic in the target and stamped with the last position it holds, so a
crash between two leaves a position that the replay resumes from exactly.
Rows steps in a row (shards of a merged target on either side of an
ALTER) are held by the writer and published together. Only the last step
that writes carries the commit's label, so a read-back that finds the
label knows the whole commit landed.

In a job whose cuts are atomic (``[job.cuts] atomic``), a transaction of
one rows step is staged instead of applied: the future resolves to the
:class:`Staged` write, and the commit counts as landed only when the
pipeline's catalog commit published it (:class:`Published`, through this
thread's queue). A transaction with a DDL, or with rows of two layouts, is
applied step by step as in any job: those cuts are not atomic across tables.

After a commit, once its schedule says so, the thread runs the target's
maintenance (:mod:`canalbridge.sync.channel.maintenance`) before it applies the next
transaction; waits on the channel meanwhile are bounded by the
maintenance's own ``timeout_seconds``.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time

import structlog

from canalbridge.sync.channel.maintenance import MaintenanceRun, MaintenanceSchedule
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.channel.work import (
    Apply,
    Published,
    ReadBack,
    ReadPosition,
    Rows,
    Staged,
    Step,
    discard,
    drop,
    take,
)
from canalbridge.sync.errors import ChannelCommitError, ColumnsChangedError, first_line
from canalbridge.sync.model.changes import Alteration
from canalbridge.sync.model.position import EntryPosition, Position, later
from canalbridge.sync.schema.ddl import RenameTable
from canalbridge.sync.schema.rows import ColumnsHistory
from canalbridge.sync.settings import MaintenanceSettings


class Committer:
    """The thread that applies a channel's sealed transactions. Its fields are written by that thread only."""

    def __init__(self, source: str, sink: ChannelSink, stop: threading.Event, maintenance: MaintenanceSettings,
                 stall_timeout_s: float, committed_position: Position | None, committed_label: str | None,
                 log: structlog.typing.FilteringBoundLogger, *, atomic: bool = False) -> None:
        self.source = source
        self._atomic = atomic
        self._sink = sink
        self.maintenance = maintenance
        self.committed_position = committed_position
        # The label the target's newest snapshot of the job carries (a consistent cut tags that snapshot).
        self.committed_label = committed_label
        self.last_maintenance: MaintenanceRun | None = None  # for status
        self.rows_written = 0
        self.last_commit_time_ms: int | None = None  # for metrics: when a commit last landed in the target
        # Waits on the channel do not give up before this (monotonic) time.
        self.grace_until = 0.0
        self.maintaining = False
        self._stop = stop
        self._stall_timeout_s = stall_timeout_s
        self._log = log
        # From the staging thread; the Consumer's one commit at a time bounds what waits here.
        self._sealed: queue.Queue[Apply | ReadPosition | Published] = queue.Queue()
        self._schedule = MaintenanceSchedule(maintenance, time.monotonic())

    def put(self, item: Apply | ReadPosition | Published) -> None:
        self._sealed.put(item)

    def run(self) -> None:
        """The thread's body: until the job stops."""
        while (item := take(self._sealed, self._stop)) is not None:
            if isinstance(item, Apply):
                self._apply(item)
            elif isinstance(item, Published):
                staged = item.staged
                self._committed(staged.label, staged.position, staged.rows)
                self._maintain_if_due()
            else:
                self._read_position(item)
        while True:  # what was sealed and not applied is consumed again: drop its staged rows
            try:
                drop(self._sealed.get_nowait())
            except queue.Empty:
                break

    def _apply(self, item: Apply) -> None:
        stamped = self.committed_position  # the last step's stamp, held or published
        # A DDL routed again (Canal's second pass refills up to what the table holds) was applied before. (The
        # rows before a DDL end before it: what the table holds when the DDL's turn comes decides the same.)
        skipped = {index for index, step in enumerate(item.steps) if isinstance(step, Alteration)
                   and stamped is not None and not step.position > stamped}
        # Only the commit's last step that writes carries its label (see Channel.read_committed_position).
        writing = [index for index in range(len(item.steps)) if index not in skipped]
        labelled = writing[-1] if writing else None
        if self._atomic and self._staged(item, stamped):
            return
        if self._atomic:
            self._log.warning("channel.applied_alone", label=item.label,
                              reason="a schema change" if any(isinstance(step, Alteration) for step in item.steps)
                              else "rows of several layouts")
        for index, step in enumerate(item.steps):
            # Each step is stamped with the last position it holds: the transaction's end for the last
            # one. A commit that fills in what Canal's first pass missed can end before the table's
            # position (see the Consumer): the table still holds everything through that. A Kafka
            # cut carries each partition's mark: the two merge lane by lane.
            last = index == len(item.steps) - 1
            through = item.end_position if last else _through(step)
            position = later(stamped, through)
            # A commit behind the table's position (it fills in what Canal's first pass missed): where it
            # really reached goes with the stamp, for a restart to go on from (see position.Refill).
            behind = through if isinstance(through, EntryPosition) and through != position else None
            label = item.label if index == labelled else f"{item.label}~{index + 1}"
            published = True
            try:
                if isinstance(step, Rows):
                    # Rows steps in a row may split a source transaction (two layouts in it): held until the
                    # last of them.
                    published = last or not isinstance(item.steps[index + 1], Rows)
                    step.sealed.apply(position, label, publish=published, behind=behind)
                elif index in skipped:
                    self._log.info("channel.ddl_applied_before", sql=step.sql, position=str(step.position))
                else:
                    self._sink.schema.alter(step, position, label)
                    self._log.info("channel.schema_changed", label=item.label, sql=step.sql,
                                   position=str(step.position))
                    for change in step.changes:
                        if isinstance(change, RenameTable):
                            self._log.info("channel.table_renamed", table=f"{change.to.schema}.{change.to.table}")
            except Exception as exc:
                for rest in item.steps[index + 1:]:
                    discard(rest, "an earlier step failed")
                if isinstance(exc, ColumnsChangedError):
                    exc = _named(exc, item.histories)
                self._log.warning("channel.commit_failed", label=item.label, error=first_line(exc))
                item.result.set_exception(ChannelCommitError(self.source, item.label, exc))
                return
            stamped = position
            if published:
                self.committed_position = position
        self._committed(item.label if labelled is not None else None, self.committed_position, item.rows)
        item.result.set_result(True)
        self._maintain_if_due()

    def _staged(self, item: Apply, stamped: Position | None) -> bool:
        """Stage a transaction of one rows step for the job's catalog commit (the writer may apply it at once
        instead); False, having done nothing, if it is not one."""
        if len(item.steps) != 1 or not isinstance(item.steps[0], Rows):
            return False
        position = later(stamped, item.end_position)
        through = item.end_position
        behind = through if isinstance(through, EntryPosition) and through != position else None
        try:
            written = item.steps[0].sealed.stage(position, item.label, behind=behind)
        except Exception as exc:
            if isinstance(exc, ColumnsChangedError):
                exc = _named(exc, item.histories)
            self._log.warning("channel.commit_failed", label=item.label, error=first_line(exc))
            item.result.set_exception(ChannelCommitError(self.source, item.label, exc))
            return True
        if written is None:  # applied at once
            self._committed(item.label, position, item.rows)
            item.result.set_result(True)
            self._maintain_if_due()
        else:
            self._log.info("channel.staged", label=item.label, rows=item.rows, position=str(position))
            item.result.set_result(Staged(written, position, item.label, item.rows))
        return True

    def _committed(self, label: str | None, position: Position | None, rows: int) -> None:
        """A commit landed in the target (``label`` None: it wrote nothing, its DDLs were applied before)."""
        self.committed_position = position
        if label is not None:
            self.committed_label = label
        self.rows_written += rows
        self.last_commit_time_ms = int(time.time() * 1000)
        self._log.info("channel.committed", label=label, rows=rows, position=str(position))

    def _maintain_if_due(self) -> None:
        if self._schedule.due(time.monotonic()) and not self._stop.is_set():
            self._maintain()

    def _maintain(self) -> None:
        started, started_ms = time.monotonic(), int(time.time() * 1000)
        self.grace_until = started + self.maintenance.timeout_seconds
        self.maintaining = True
        report, error = None, None
        try:
            report = self._sink.maintainer.maintain(self.maintenance)
        except Exception as exc:  # the sync goes on; the next run tries again
            error = first_line(exc)
        finally:
            ended = time.monotonic()
            self.grace_until = ended + self._stall_timeout_s
            self.maintaining = False
            self._schedule.ran(ended)
        self.last_maintenance = MaintenanceRun(started_ms, ended - started, report, error)
        if report is None:
            self._log.warning("channel.maintenance_failed", error=error, seconds=round(ended - started, 3))
        else:
            self._log.info("channel.maintained", seconds=round(ended - started, 3), **dataclasses.asdict(report))

    def _read_position(self, item: ReadPosition) -> None:
        try:
            state = self._sink.state.read_state()
            position, label = state.position, state.label
        except Exception as exc:
            item.result.set_exception(ChannelCommitError(self.source, item.label, exc))
            return
        if position is not None and (self.committed_position is None or position > self.committed_position):
            self._log.warning("channel.commit_landed_despite_error", position=str(position))
            self.committed_position = position
        if label is not None:  # (what landed of a failed commit: the target's newest stamp names it)
            self.committed_label = label
        item.result.set_result(ReadBack(self.committed_position, label))


def _named(exc: ColumnsChangedError, histories: tuple[ColumnsHistory, ...]) -> Exception:
    """A writer's error for rows whose columns changed, naming the table's last DDL where it is known."""
    history = next((h for h in histories if h.table.lower() == exc.table.lower()),
                   histories[0] if len(histories) == 1 else None)
    return exc if history is None else history.columns_changed(exc.columns, exc.count, exc.position)


def _through(step: Step) -> Position:
    """The last position a step that is not its transaction's last holds."""
    if isinstance(step, Rows):
        assert step.last is not None, "rows sealed before a DDL know their last position"
        return step.last
    return step.position
