"""A sync job's state machine: PENDING -> RUNNING <-> PAUSED, and CANCELLED (final) from any of them; RUNNING ->
FINISHED once the snapshot of a job in ``mode = "only"`` is done.

A transient failure that outlived its retries pauses the job with the
reason; ``resume()`` starts it again from Canal's ack cursor. A start that
fails, or a source that stayed away for all its reconnect attempts, pauses
it too: for an outage (anything but a :class:`SyncError` that retrying
cannot fix) the daemon's jobs are started again with back-off
(:mod:`canalbridge.sync.job.start_retry`); otherwise it waits for a person.
Only a user cancels a job. ``pause()`` stops every thread without acking
anything uncommitted. Each start makes a new :class:`JobRun` (the
threads); what is known of the job is one :class:`JobRecord`.

Its length: the transitions and the record they keep share one lock; the run, the on-demand
snapshots and verifies and the start retries are modules of their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import structlog

from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.channel.maintenance import MaintenanceRun
from canalbridge.sync.channel.sink import CatalogPublisher, ChannelSink
from canalbridge.sync.errors import JobStateError, ReceiverGaveUp, SyncError
from canalbridge.sync.job.cuts import CutLog
from canalbridge.sync.job.on_demand import OnDemand
from canalbridge.sync.job.rebuild import channel_to_rebuild, mark_for_rebuild
from canalbridge.sync.job.run import JobRun, RunContext
from canalbridge.sync.job.start_retry import StartRetry
from canalbridge.sync.model.cuts import PublishedCut
from canalbridge.sync.model.record import ChannelRecord, FailKind, FailMessage, JobRecord, JobState, PartitionRecord
from canalbridge.sync.model.stats import ConsumerStats, ReceiverStats
from canalbridge.sync.model.tracking import AckState, CommittedPositions
from canalbridge.sync.routing.rules import Routes, known_channels
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.snapshot.runner import SnapshotRunner
from canalbridge.sync.snapshot.source import SnapshotSource
from canalbridge.sync.snapshot.verify import VerifyRunner
from canalbridge.sync.snapshot.windows import Windows

log = structlog.get_logger("canalbridge.job")

__all__ = ["FailKind", "FailMessage", "JobState", "JobStateError", "SyncJob"]


SinkFactory = Callable[[ChannelSettings], ChannelSink]
# Called with the job and whether its state changed (else: a commit happened).
JobListener = Callable[["SyncJob", bool], None]


class SyncJob:
    """One job's state machine; thread-safe control methods."""

    def __init__(
        self, settings: JobSettings, sink_factory: SinkFactory, listener: JobListener | None = None,
        snapshot: SnapshotSource | None = None, *, retry_starts: bool = False, cut_log: CutLog | None = None,
        publisher: CatalogPublisher | None = None,
    ) -> None:
        """``retry_starts``: start again, with back-off, after a pause for an outage (the daemon's jobs do).
        ``cut_log``: where the job's consistent cuts are tagged and logged (``[job.cuts]``). ``publisher``: the
        catalog commit of atomic cuts (``[job.cuts] atomic``)."""
        self.settings = settings
        self._cut_log = cut_log
        self._publisher = publisher
        self._last_cut: PublishedCut | None = None  # the newest the log holds, as the publishers last saw it
        # A snapshot's chunk windows, which a run's snapshot runner registers and every run's Consumer moves on.
        self.windows = (Windows(settings.snapshot.signal) if settings.snapshot is not None and settings.snapshot.active
                        else None)
        self._snapshot = snapshot if self.windows is not None else None
        self._source_db = snapshot.connect if snapshot is not None else None  # (heartbeats, in any mode)
        self.name = settings.name
        self.listener = listener
        self.sink_factory = sink_factory
        # What outlives a run of the threads:
        self.committed = CommittedPositions()
        self.acks = AckState()
        self.stats = ConsumerStats()
        self.receiver_stats = ReceiverStats()
        self._sinks: dict[str, ChannelSink] = {}
        self._record = JobRecord(self.name, JobState.PENDING, self._channel_records(), create_time_ms=_now_ms())
        self._run: JobRun | None = None
        self._left_behind: JobRun | None = None  # a stopped run with threads still busy
        self._lock = threading.RLock()
        self._state_changed = threading.Condition(self._lock)
        self._handler: threading.Thread | None = None  # what a worker thread asked for, done from outside it
        self._log = log.bind(job=self.name)
        self._start_retry = StartRetry(self.name, settings.commit.reconnect_retry, self._start_again,
                                       enabled=retry_starts)
        # The snapshots and verifies a user asks for while the job runs.
        self.on_demand = OnDemand(settings, self._snapshot, self._lock, lambda: self._run, lambda: self.state)

    # -- control ------------------------------------------------------------------------

    def start(self) -> None:
        """PENDING or PAUSED -> RUNNING: open the channels and start the threads.

        A job restored as RUNNING (it ran when the daemon stopped) starts too, and so does a FINISHED one whose
        snapshot mode is no longer ``only`` (it streams on). A job in ``mode = "only"`` with no table left to
        snapshot ends FINISHED at once.
        """
        with self._lock:
            restored_running = self.state is JobState.RUNNING and self._run is None
            streams_on = self.state is JobState.FINISHED and not self.snapshot_only
            if self.state not in (JobState.PENDING, JobState.PAUSED) and not restored_running and not streams_on:
                raise JobStateError(f"job {self.name} cannot start from {self.state.value}")
            busy = self.stuck
            if busy:
                raise JobStateError(f"job {self.name} cannot start while threads of its last run are still busy "
                                    f"({', '.join(busy)}): a commit hangs in the target")
            run = JobRun(RunContext(
                self.settings, self._sink_for, self.committed, self.acks, self.stats, self.receiver_stats, self._fail,
                on_commit=lambda: self._notify(transition=False), windows=self.windows, snapshot=self._snapshot,
                source_db=self._source_db,
                on_snapshot_finished=self._snapshot_finished if self.snapshot_only else None,
                cut_log=self._cut_log, on_cut_published=self._cut_published, publisher=self._publisher))
            try:
                run.start()
            except Exception as exc:  # a target that cannot be opened: paused, and started again if it may pass
                self._paused_by(exc, "job.cannot_start")
                raise
            self._start_retry.cancel()
            self._run = run
            self._update(last_start_time_ms=_now_ms(), finish_time_ms=None)
            self._set_state(JobState.RUNNING, None)
            if self.snapshot_only and run.snapshot is None:  # every target holds its table's finished snapshot
                self._finish()

    def resume(self) -> None:
        """PAUSED -> RUNNING, from Canal's ack cursor."""
        with self._lock:
            if self.state is JobState.FINISHED:
                raise JobStateError(f"job {self.name} is FINISHED: its snapshot is done and [job.snapshot] mode is "
                                    f"\"only\"; to stream on, set mode = \"initial\" and restart the daemon")
            if self.state is not JobState.PAUSED:
                raise JobStateError(f"job {self.name} is {self.state.value}, not PAUSED")
            self._start_retry.cancel()
            self.start()

    def pause(self, reason: str | None = None) -> None:
        """RUNNING -> PAUSED: stop every thread; nothing uncommitted is acked."""
        with self._lock:
            if self.state is JobState.PAUSED and self._start_retry.status() is not None:
                # A person takes over from the retries, across a restart too (the kind is no longer OUTAGE).
                self._start_retry.cancel()
                last = self.fail_message.text if self.fail_message is not None else "unknown"
                self._set_state(JobState.PAUSED, FailMessage(
                    FailKind.RUN_FAIL, reason or f"paused while it waited to start again; the last start: {last}"))
                return
            if self.state is not JobState.RUNNING:
                raise JobStateError(f"job {self.name} is {self.state.value}, not RUNNING")
            self._stop_run()
            self._set_state(JobState.PAUSED, FailMessage(FailKind.RUN_FAIL, reason) if reason else None)

    def cancel(self, reason: str = "cancelled by user", kind: FailKind = FailKind.USER_CANCEL) -> None:
        """Any state -> CANCELLED, for good."""
        with self._lock:
            if self.state is JobState.CANCELLED:
                return
            self._start_retry.cancel()
            self._stop_run()
            self._update(finish_time_ms=_now_ms())
            self._set_state(JobState.CANCELLED, FailMessage(kind, reason))

    def reset(self, targets: Sequence[str] = (),
              forget: Callable[[tuple[ChannelRecord, ...]], None] | None = None) -> tuple[ChannelRecord, ...]:
        """PAUSED -> PAUSED: forget where the channels writing ``targets`` stood (none named: every channel), and
        Canal's last ack. Returns the channels reset.

        Each target forgets its committed position, so what the source sends
        next is applied whatever the target holds (``canalbridge reset``:
        replay a range, rebuild a table, start over on another source). The
        ack goes too: it decides nothing any more, and a replay from an
        earlier binlog file must not be taken for another server. ``forget``
        clears the same in the state store, under the job's lock.
        """
        with self._lock:
            if self.state is not JobState.PAUSED:
                raise JobStateError(f"job {self.name} is {self.state.value}: pause it before a reset")
            busy = self.stuck
            if busy:
                raise JobStateError(f"job {self.name} cannot be reset while threads of its last run are still busy "
                                    f"({', '.join(busy)}): a commit hangs in the target")
            channels = self._record.channels
            by_target = {c.target.lower(): c for c in channels}
            unknown = [repr(t) for t in targets if not t.strip() or t.lower() not in by_target]
            if unknown:
                raise KeyError(f"job {self.name} has no channel writing {', '.join(unknown)} "
                               f"(its targets: {', '.join(c.target for c in channels) or 'none yet'})")
            chosen = tuple(by_target[t.lower()] for t in targets) if targets else channels
            routes = Routes(self.name, self.settings.channels)
            named = {c.source: c for c in self.settings.channels if c.pattern is None}
            resolved = []
            for record in chosen:  # every channel's settings before any target is touched
                settings = named.get(record.source) or routes.made(record.source, record.target)
                if settings is None:
                    raise KeyError(f"job {self.name}: no channel and no rule makes {record.source} now")
                resolved.append(settings)
            for settings in resolved:  # the targets first: a reset that fails on one is run again whole
                self._sink_for(settings).state.forget_position()
            self._positions_forgotten(chosen, forget)
            self._start_retry.cancel()
            self.acks.forget()
            self._log.warning("job.reset", channels=sorted(c.target for c in chosen))
            self._update(fail=None)  # (what paused it is over: the operator chose where to start again)
            self._set_state(JobState.PAUSED, None)
            return chosen

    def rebuild(self, table: str, forget: Callable[[tuple[ChannelRecord, ...]], None] | None = None,
                ) -> ChannelRecord:
        """PAUSED or RUNNING -> RUNNING: make the target of the channel named for ``table`` anew from the source
        (:mod:`canalbridge.sync.job.rebuild`), while the other channels stream on. ``forget`` clears the
        channel's position in the state store, under the job's lock. Returns the channel."""
        with self._lock:
            if self.state not in (JobState.PAUSED, JobState.RUNNING):
                raise JobStateError(f"job {self.name} is {self.state.value}: only a paused or running job is rebuilt")
            channel = channel_to_rebuild(self.settings, table)
            busy = self.stuck
            if busy:
                raise JobStateError(f"job {self.name} cannot rebuild a table while threads of its last run are "
                                    f"still busy ({', '.join(busy)}): a commit hangs in the target")
            was_running = self.state is JobState.RUNNING
            if was_running:
                self._stop_run()
                self._set_state(JobState.PAUSED, None)
                if self.stuck:  # (a commit that hangs now: the mark waits for it)
                    raise JobStateError(f"job {self.name} paused, and threads of its run are still busy "
                                        f"({', '.join(self.stuck)}): rebuild once they ended")
            try:
                mark_for_rebuild(channel, self._sink_for(channel))
            except Exception:
                if was_running:  # (refused: the job streams on as it did)
                    self.start()
                raise
            chosen = tuple(c for c in self._record.channels if c.source == channel.source)
            self._positions_forgotten(chosen, forget)
            self._log.warning("job.rebuild", table=channel.source, target=channel.target)
            self._update(fail=None)
            self._start_retry.cancel()
            self.start()
            return chosen[0] if chosen else ChannelRecord(channel.source, channel.target)

    def _positions_forgotten(self, chosen: tuple[ChannelRecord, ...],
                             forget: Callable[[tuple[ChannelRecord, ...]], None] | None) -> None:
        """The channels ``chosen`` (their targets forgot their positions) hold none here, in the job's record, or
        (``forget``) in the state store either. Call with the lock held."""
        for record in chosen:
            self.committed.forget(record.source)
        if forget is not None:
            forget(chosen)
        gone = {record.source for record in chosen}
        self._update(channels=tuple(replace(c, committed=None) if c.source in gone else c
                                    for c in self._record.channels))

    def shutdown(self) -> tuple[str, ...]:
        """Stop the threads for a daemon shutdown, keeping the state to resume at next start.

        Returns the threads that did not stop within the bound.
        """
        self._start_retry.close()  # (outside the lock: a retry in progress takes it)
        with self._lock:
            if self.state is JobState.RUNNING:
                self._stop_run()
                self._notify(transition=False)
            return self.stuck

    def wait_state(self, state: JobState, timeout_s: float) -> bool:
        """Wait until the job is in ``state``."""
        with self._state_changed:
            return self._state_changed.wait_for(lambda: self.state is state, timeout_s)

    # -- inspection -----------------------------------------------------------------------

    @property
    def state(self) -> JobState:
        return self._record.state

    @property
    def fail_message(self) -> FailMessage | None:
        return self._record.fail

    @property
    def channels(self) -> list[Channel]:
        """The running channels (for metrics); empty when no run is on."""
        run = self._run
        return list(run.channels) if run is not None else []

    @property
    def stuck(self) -> tuple[str, ...]:
        """Threads of a stopped run that are still busy (a commit hanging in the target)."""
        left = self._left_behind
        return left.still_running() if left is not None else ()

    def wait_unstuck(self, timeout_s: float) -> bool:
        """Wait for the threads of a stopped run that were still busy; True once none is."""
        left = self._left_behind
        return left is None or not left.join(timeout_s)

    @property
    def snapshot_only(self) -> bool:
        """The job ends FINISHED once its snapshot is done, instead of streaming on."""
        return self.settings.snapshot is not None and self.settings.snapshot.only

    @property
    def snapshot(self) -> SnapshotRunner | None:
        """The running snapshot of this run, if a table's snapshot was left to do when it started."""
        run = self._run
        return run.snapshot if run is not None else None

    @property
    def verify(self) -> VerifyRunner | None:
        """The last verify of this run, if one was asked for (it holds its tables' checks once it ended)."""
        run = self._run
        return run.verify if run is not None else None

    def position_info(self) -> str:
        return self.acks.position_info()

    def record(self) -> JobRecord:
        """Everything known of the job now, for the state store and status.

        Its channels: those named for one table, and those the rules made,
        in this run or (remembered by the state store) before it.
        """
        committed = self.committed.as_dict()
        live = self.channels
        notes = {channel.source: channel.layout_note for channel in live}
        maintenance = {channel.source: channel.last_maintenance for channel in live}
        runner = self.snapshot
        snapshot = runner.channel_status() if runner is not None else {}
        verifier = self.verify
        verify = verifier.checks() if verifier is not None else {}
        known = {c.source: c for c in self._record.channels}
        made = [channel.settings for channel in live]
        # A rule's tables being snapshotted or verified show before the stream (or a first chunk) opens their
        # channels.
        made += [table.channel for table in (runner.tables if runner is not None else ()) if table.channel is not None]
        made += [table.channel for table in (verifier.tables if verifier is not None else ())
                 if table.channel is not None]
        for settings in made:
            if settings.source not in known:
                known[settings.source] = ChannelRecord(settings.source, settings.target, rule=settings.rule)
        return replace(
            self._record,
            channels=tuple(
                ChannelRecord(c.source, c.target, committed.get(c.source) or c.committed, notes.get(c.source),
                              _describe(maintenance.get(c.source)), c.rule, snapshot.get(c.source),
                              verify.get(c.source))
                for c in known.values()),
            ack=self.acks.last,
            last_commit_time_ms=self.stats.last_commit_time_ms,
            updated_ms=_now_ms(),
            stuck=self.stuck,
            partitions=self._partitions(),
            start_retry=self._start_retry.status(),
            cut=self._last_cut,
            cut_error=run.cuts.error if (run := self._run) is not None and run.cuts is not None else None,
        )

    def _cut_published(self, published: PublishedCut) -> None:
        """A run's publisher logged a cut, or read the newest the log holds (its thread)."""
        last = self._last_cut
        if last is None or published.seq >= last.seq:
            self._last_cut = published

    def _partitions(self) -> tuple[PartitionRecord, ...]:
        run = self._run
        link = run.link if run is not None else None
        return link.partitions() if link is not None else ()

    def restore(self, record: JobRecord) -> None:
        """Take back what the state store remembers (before start)."""
        with self._lock:
            # Not the committed positions: the targets' snapshots are read at start and
            # win (a table rolled back by its owner must be written again). The channels
            # rules made are listed (for status) until they are met again.
            channels = tuple(replace(c, committed=None) if c.rule is None else c
                             for c in known_channels(self.settings, record.channels))
            self._record = replace(record, channels=channels, stuck=())
            ack = record.ack
            if ack is not None and not self.settings.source.reads(ack.position):
                ack = None  # the job's source changed kind since: that ack says nothing about this one
            self.acks.last = ack
            self.stats.last_commit_time_ms = record.last_commit_time_ms

    # -- internals -------------------------------------------------------------------------

    def _sink_for(self, channel: ChannelSettings) -> ChannelSink:
        sink = self._sinks.get(channel.source)
        if sink is None:
            sink = self._sinks[channel.source] = self.sink_factory(channel)
        return sink

    def _channel_records(self) -> tuple[ChannelRecord, ...]:
        return known_channels(self.settings)

    def _stop_run(self) -> None:
        """Stop the running threads within the bound. Call with the lock held."""
        if self._run is not None:
            self._update(channels=self.record().channels)  # those rules opened stay listed, with positions
        run, self._run = self._run, None
        if run is None:
            return
        # A start is refused while an earlier run is busy, so nothing older is left behind.
        self._left_behind = run if run.stop(self.settings.commit.stop_timeout_seconds) else None
        self._update(last_stop_time_ms=_now_ms())

    def _fail(self, error: SyncError) -> None:
        """Called from a worker thread that gave up: pause from another thread."""

        def handle() -> None:
            with self._lock:
                if self.state is not JobState.RUNNING:
                    return
                self._stop_run()
                if isinstance(error, ReceiverGaveUp) and error.outage:  # the source stayed away: it may come back
                    self._paused_by(error, "job.paused")
                    return
                # Paused, not cancelled: retrying cannot fix a row that does not fit
                # its table, but an operator who fixes the target can resume.
                self._set_state(JobState.PAUSED, FailMessage(FailKind.RUN_FAIL, str(error)))
                self._log.error("job.paused", reason=str(error), stuck=list(self.stuck))

        self._elsewhere("fail", handle)

    def _paused_by(self, exc: BaseException, event: str) -> None:
        """PAUSED for ``exc``: an outage schedules a new start; an error retrying cannot fix waits for a person.
        Call with the lock held."""
        if isinstance(exc, SyncError) and not exc.transient:
            self._set_state(JobState.PAUSED, FailMessage(FailKind.SUBMIT_FAIL, str(exc)))
            self._log.error(event, reason=str(exc), retry=False)
            return
        wait = self._start_retry.schedule(str(exc))  # first, so that the record saved with the state shows it
        self._set_state(JobState.PAUSED, FailMessage(FailKind.OUTAGE, str(exc)))
        self._log.error(event, reason=str(exc), retry_in_s=None if wait is None else round(wait, 3))

    def _start_again(self) -> None:
        """The start retry's call: start, unless a person or another start has taken over meanwhile."""
        with self._lock:
            if self.state is not JobState.PAUSED or self.fail_message is None \
                    or self.fail_message.kind is not FailKind.OUTAGE:
                return
            try:
                self.start()
            except Exception:  # paused again, and the next try scheduled, by start()
                return

    def _snapshot_finished(self, runner: SnapshotRunner) -> None:
        """Called from ``runner``'s thread once it ended (every table done, or cancelled), in ``mode = "only"``:
        finish from another thread, if it is still the run's snapshot (a new one may have begun meanwhile)."""

        def handle() -> None:
            with self._lock:
                if self.state is JobState.RUNNING and self._run is not None and self._run.snapshot is runner:
                    self._finish()

        self._elsewhere("finish", handle)

    def _finish(self) -> None:
        """RUNNING -> FINISHED: stop the threads; what is committed stays, and is acked at the next start if
        it was not yet. Call with the lock held."""
        self._stop_run()
        self._update(finish_time_ms=_now_ms())
        self._set_state(JobState.FINISHED, None)

    def _elsewhere(self, what: str, handle: Callable[[], None]) -> None:
        # A worker thread cannot join itself, so the run stops from another thread.
        self._handler = threading.Thread(target=handle, name=f"job-{what}-{self.name}", daemon=True)
        self._handler.start()

    def _update(self, **changes: Any) -> None:
        self._record = replace(self._record, **changes)

    def _set_state(self, state: JobState, message: FailMessage | None) -> None:
        previous = self.state
        if message is not None or state is JobState.RUNNING:
            self._update(state=state, fail=message)
        else:
            self._update(state=state)
        self._log.info("job.state", previous=previous.value, state=state.value, reason=str(message or ""))
        self._state_changed.notify_all()
        self._notify(transition=True)

    def _notify(self, *, transition: bool) -> None:
        if self.listener is not None:
            try:
                self.listener(self, transition)
            except Exception as exc:  # a listener must not break the job
                self._log.error("job.listener_failed", error=str(exc))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _describe(run: MaintenanceRun | None) -> str | None:
    return run.describe() if run is not None else None
