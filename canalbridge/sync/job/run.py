"""One run of a job's threads: channels, the source's link, Receiver, Consumer and the snapshot's runner (while a
table's snapshot is left to do), from start to a bounded stop.

A job (:mod:`canalbridge.sync.job.job`) makes a new run each time it starts or
resumes, and keeps what outlives a run: the sinks, the committed
positions, the ack state and the counters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from canalbridge.source_db import SourceDb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.channel.sink import CatalogPublisher, ChannelSink
from canalbridge.sync.consumer.consumer import Consumer
from canalbridge.sync.consumer.heartbeat import Heartbeat
from canalbridge.sync.errors import ChannelOpenError, SnapshotError, Stopping, SyncError, TargetSourceMismatchError
from canalbridge.sync.job.cuts import CutLog, CutPublisher
from canalbridge.sync.model.cuts import Cut, PublishedCut
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.stats import ConsumerStats, ReceiverStats
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.model.tracking import AckState, CommittedPositions
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.snapshot.discovery import RoutedTable, keyed, rule_tables, unfinished
from canalbridge.sync.snapshot.progress import TableProgress
from canalbridge.sync.snapshot.runner import SnapshotRunner, SnapshotTable
from canalbridge.sync.snapshot.source import SnapshotSource
from canalbridge.sync.snapshot.verify import VerifyRunner, VerifyTable
from canalbridge.sync.snapshot.windows import Windows
from canalbridge.sync.source.link import LinkSetup, SourceLink
from canalbridge.sync.source.links import open_link
from canalbridge.sync.source.receiver import Receiver
from canalbridge.sync.worker import Worker

log = structlog.get_logger("canalbridge.job")


def _check_source(settings: JobSettings, target: str, position: Position | None) -> None:
    """A target written through one kind of source cannot go on through the other: positions do not compare."""
    if position is None or settings.source.reads(position):
        return
    raise TargetSourceMismatchError(
        settings.name, target,
        f"was written through {position.written_through()} at {position}; this job reads {settings.source.READS}, "
        "and the two positions do not compare. Keep the job's source, or write into new targets")


@dataclass(frozen=True)
class RunContext:
    """What a job's runs share and outlive: its settings and targets, its positions and counters, the chunk
    windows and the snapshot's source, and what a run reports to the job."""

    settings: JobSettings
    sink_for: Callable[[ChannelSettings], ChannelSink]
    committed: CommittedPositions
    acks: AckState
    stats: ConsumerStats
    receiver_stats: ReceiverStats
    on_failure: Callable[[SyncError], None]
    on_commit: Callable[[], None]  # a commit landed (the job saves its record)
    windows: Windows | None = None
    snapshot: SnapshotSource | None = None
    # Connections to the source database, whatever the snapshot's mode (heartbeats write with them).
    source_db: Callable[[], SourceDb] | None = None
    on_snapshot_finished: Callable[[SnapshotRunner], None] | None = None  # (a job in `mode = "only"`)
    cut_log: CutLog | None = None  # where consistent cuts are tagged and logged (none: they are not)
    on_cut_published: Callable[[PublishedCut], None] = lambda published: None
    # The catalog commit that makes every channel's staged write current at once (``[job.cuts] atomic``).
    publisher: CatalogPublisher | None = None


class JobRun:
    """Starts a job's threads; :meth:`stop` joins each within a bound and names those that did not stop."""

    def __init__(self, context: RunContext) -> None:
        settings = context.settings
        self.settings = settings
        self._windows = context.windows
        self._snapshot = context.snapshot
        self._on_snapshot_finished = context.on_snapshot_finished
        self.snapshot: SnapshotRunner | None = None  # this run's, if a table's snapshot is left to do
        self.heartbeat: Heartbeat | None = None  # this run's heartbeat writer, if the job writes them
        self.cuts: CutPublisher | None = None  # this run's publisher of consistent cuts, if the job has them
        # (Atomic cuts need no tags: every cut is one catalog commit.)
        self._cut_log = context.cut_log if settings.cuts.enabled and not settings.cuts.atomic else None
        self._publisher = context.publisher if settings.cuts.atomic else None
        if settings.cuts.atomic and self._publisher is None:
            raise ValueError(f"job {settings.name}: atomic cuts need a catalog publisher")
        self._on_cut_published = context.on_cut_published
        self._source_db = context.source_db
        self.verify: VerifyRunner | None = None  # this run's last verify, if one was asked for
        self.channels: list[Channel] = []
        self._sink_for = context.sink_for
        self._committed = context.committed
        self._acks = context.acks
        self._stats = context.stats
        self._receiver_stats = context.receiver_stats
        self._on_failure = context.on_failure
        self._on_commit = context.on_commit
        self._stop = threading.Event()
        self._link: SourceLink | None = None
        self._workers: list[Worker] = []
        self._log = log.bind(job=settings.name)

    def start(self) -> None:
        """Open every channel named for one table (reading its committed position back), then start the
        Receiver and Consumer; rules open theirs as their tables appear.

        If a channel cannot be opened, the ones already started are stopped
        and the error is raised.
        """
        settings = self.settings
        try:
            for channel_settings in settings.channels:
                if channel_settings.pattern is None:
                    self.open_channel(channel_settings)
            waiting = [channel.settings.target for channel in self.channels if channel.rebuild_pending]
            if waiting and (self._windows is None or self._snapshot is None):
                # (its channel would drop the table's changes, waiting for a snapshot that never comes)
                raise SnapshotError(waiting[0], "the target waits to be rebuilt (canalbridge rebuild), which reads "
                                                "the table from the source: give the job [job.snapshot] with mode "
                                                "\"initial\" or \"only\" again")
        except Exception:
            self.stop(settings.commit.stop_timeout_seconds)
            raise
        self._link = self._new_link()
        snapshot = settings.snapshot
        if snapshot is not None and snapshot.heartbeat and self._source_db is not None:
            self.heartbeat = Heartbeat(settings.name, self._source_db, snapshot.signal, self._stop)
        if self._cut_log is not None:
            self.cuts = CutPublisher(settings.name, self._cut_log, settings.cuts, self._stop, self._on_cut_published)
        self._workers = [
            Receiver(settings.name, self._link, settings.commit.reconnect_retry, self._stop, self._on_failure,
                     debug=settings.debug, stats=self._receiver_stats),
            Consumer(settings, self._link, self.channels, self._committed, self._acks, self._stop, self._on_failure,
                     on_commit=self._on_commit, stats=self._stats, open_channel=self._open_for_consumer,
                     windows=self._windows, heartbeat=self.heartbeat.request if self.heartbeat else None,
                     on_whole_cut=self._whole_cut if self.cuts is not None else None, publisher=self._publisher),
        ]
        tables = self._snapshot_tables()
        discover = self._rule_discovery()
        if tables or discover is not None:
            assert self._windows is not None and self._snapshot is not None and settings.snapshot is not None
            self.snapshot = SnapshotRunner(settings.name, tables, self._windows, self._snapshot, settings.snapshot,
                                           self._stop, self._on_failure, self._on_snapshot_finished,
                                           reconnect=settings.commit.reconnect_retry, discover=discover)
            # First: alive before the Receiver opens the link, which asks whether a snapshot runs.
            self._workers.insert(0, self.snapshot)
        for worker in self._workers:
            worker.start()
        if self.heartbeat is not None:
            self.heartbeat.start()
        if self.cuts is not None:
            self.cuts.start()

    def start_snapshot(self, tables: Sequence[SnapshotTable]) -> SnapshotRunner:
        """Start a new snapshot of ``tables`` while the stream runs (a re-sync, a back-fill); the job checked
        that none runs."""
        assert self._windows is not None and self._snapshot is not None and self.settings.snapshot is not None
        assert self.snapshot is None or not self.snapshot.alive
        runner = SnapshotRunner(self.settings.name, tables, self._windows, self._snapshot, self.settings.snapshot,
                                self._stop, self._on_failure, self._on_snapshot_finished, announce=True,
                                reconnect=self.settings.commit.reconnect_retry)
        self.snapshot = runner
        self._workers.append(runner)  # (joined by stop, as the others)
        runner.start()
        return runner

    def followed_name(self, source: str) -> TableId | None:
        """The name the table of the channel of ``source`` goes by now, if that channel followed a RENAME: as its
        target recorded it when the channel started, then as the stream renamed it since (the router keeps the
        live name on the Consumer's thread; the stream's renames are in the windows too)."""
        channel = next((c for c in list(self.channels) if c.source == source), None)
        started = TableId.parse(source if channel is None or channel.source_table is None else channel.source_table)
        now = self._windows.current(started) if self._windows is not None else started
        return None if now.key == TableId.parse(source).key else now

    def cancel_parked(self, tables: Sequence[SnapshotTable]) -> SnapshotRunner:
        """Land a mark that the snapshot of each of ``tables`` (parked: it could not go on) is done, so that no
        restart takes it up again; the job checked that no snapshot runs."""
        assert self._windows is not None and self._snapshot is not None and self.settings.snapshot is not None
        runner = SnapshotRunner(self.settings.name, tables, self._windows, self._snapshot, self.settings.snapshot,
                                self._stop, self._on_failure, reconnect=self.settings.commit.reconnect_retry)
        runner.cancel()  # (before it reads anything: it only lands the marks)
        self.snapshot = runner
        self._workers.append(runner)  # (joined by stop, as the others)
        runner.start()
        return runner

    def start_verify(self, tables: Sequence[VerifyTable]) -> VerifyRunner:
        """Start a verify of ``tables`` while the stream runs; the job checked that nothing else reads windows."""
        assert self._windows is not None and self._snapshot is not None and self.settings.snapshot is not None
        runner = VerifyRunner(self.settings.name, tables, self._windows, self._snapshot, self.settings.snapshot,
                              self._stop)
        self.verify = runner
        self._workers.append(runner)  # (joined by stop, as the others)
        runner.start()
        return runner

    def windows_busy(self) -> str | None:
        """What holds the job's windows now (a snapshot or a verify of its tables) and what to do, if anything."""
        if self.snapshot is not None and self.snapshot.running:
            tables = ", ".join(t.name for t in self.snapshot.tables)
            if not tables:  # (none named, and those the rules take not found yet)
                return "the snapshot is looking for the tables the job's patterns take; wait for it"
            return f"the snapshot of {tables} is running; wait for it, or cancel it (canalbridge snapshot --cancel)"
        if self.verify is not None and self.verify.running:  # (set once its windows are forgotten)
            tables = ", ".join(t.name for t in self.verify.tables)
            if self.verify.cancelled:
                return f"the verify of {tables} is being cancelled; it ends once the read in flight returns"
            return f"the verify of {tables} is running; wait for it, or cancel it (canalbridge verify --cancel)"
        return None

    def _whole_cut(self, label: str, position: Position) -> None:
        """Every channel committed through ``position`` (Consumer thread): offer it as a consistent cut, unless a
        target lacks rows of its table that the source held there (its snapshot or rebuild is not done)."""
        assert self.cuts is not None
        snapshot = self.snapshot
        channels = list(self.channels)
        if (snapshot is not None and (snapshot.running or snapshot.parked())) or any(
                channel.rebuild_pending for channel in channels):
            return
        targets: dict[str, set[str]] = {}
        for channel in channels:
            if channel.committed_label is not None:  # (a target the job never wrote holds nothing of it)
                targets.setdefault(channel.settings.target, set()).add(channel.committed_label)
        if targets:
            self.cuts.offer(Cut(label, position, {target: frozenset(labels) for target, labels in targets.items()}))

    def snapshot_refusal(self) -> str | None:
        """Why a new snapshot cannot start in this run (None: it can): the stream's own reason, if any."""
        link = self._link
        return link.snapshot_refusal() if link is not None else None

    def _snapshotting(self) -> bool:
        """Whether this run's snapshot (or a verify) is left to do (read by the link from the Receiver's
        thread)."""
        return self.windows_busy() is not None

    def _snapshot_tables(self) -> list[SnapshotTable]:
        """The tables of the channels named for one table whose targets do not hold a finished snapshot of them,
        with the progress they hold; those whose targets wait to be made anew (``canalbridge rebuild``) first."""
        if self._windows is None or self._snapshot is None:
            return []
        tables = []
        for channel in self.channels:
            progress = channel.snapshot.get(channel.source)
            if channel.rebuild_pending or progress is None or not progress.finished:
                tables.append(SnapshotTable(*TableId.parse(channel.source), channel.settings.key, progress,
                                            rebuild=channel.rebuild_pending,
                                            current=self.followed_name(channel.source)))
        return sorted(tables, key=lambda table: not table.rebuild)

    def _rule_discovery(self) -> Callable[[SourceDb], list[SnapshotTable]] | None:
        """How the snapshot finds the tables the job's rules take that hold rows from before the stream (None:
        the job has no rule, or no snapshot that reads them). Not over Kafka: a runner at every start would
        refuse the topics of several partitions that rules stream from today."""
        source = self._snapshot
        settings = self.settings
        if (self._windows is None or source is None or source.progress is None or not settings.has_rules
                or not settings.source.DISCOVERS_RULE_TABLES):
            return None
        progress = source.progress

        def progress_of(target: str) -> Mapping[str, TableProgress]:
            if self._stop.is_set():  # (a target's read takes a while: a stop does not wait for them all)
                raise Stopping()
            return progress(target)

        def discover(db: SourceDb) -> list[SnapshotTable]:
            tables, left = keyed(db, unfinished(self.pattern_tables(db), progress_of))
            for name, why in left:
                self._log.warning("snapshot.table_not_snapshotted", table=name, error=why)
            if left and settings.snapshot is not None and settings.snapshot.only:  # (the job would end without it)
                raise SnapshotError(left[0][0], f"{left[0][1]}: mode = \"only\" ends the job once the snapshot is "
                                                f"done, and this table a pattern takes cannot be snapshotted")
            return tables

        return discover

    def pattern_tables(self, db: SourceDb) -> list[RoutedTable]:
        """The source's tables the job's rules take now, as the stream routes them (found in ``db``)."""
        # A table a named channel follows under its new name is that channel's, as the router routes it.
        followed = {channel.source_table.lower() for channel in list(self.channels)
                    if channel.source_table is not None and channel.settings.rule is None}
        return [table for table in rule_tables(db, self.settings) if table.name.lower() not in followed]

    def open_channel(self, channel_settings: ChannelSettings) -> Channel:
        """Start a channel (reading its committed position back from its target) and count it in this run."""
        settings = self.settings
        channel = Channel(settings.name, channel_settings, self._sink_for(channel_settings), self._stop,
                          settings.commit.commit_timeout_seconds, maintenance=settings.maintenance,
                          schema=settings.schema, debug=settings.debug, atomic=self._publisher is not None)
        channel.start()  # (it starts no thread unless it read its target)
        self.channels.append(channel)  # from here the run's stop joins its threads
        _check_source(settings, channel_settings.target, channel.committed_position)
        self._committed.read_back(channel.source, channel.committed_position)
        return channel

    def _open_for_consumer(self, channel_settings: ChannelSettings) -> Channel:
        """A channel for a table a rule took mid-run: a target that cannot be opened fails the transaction."""
        try:
            return self.open_channel(channel_settings)
        except SyncError:
            raise
        except Exception as exc:
            raise ChannelOpenError(channel_settings.source, channel_settings.target, exc) from exc

    def _new_link(self) -> SourceLink:
        return open_link(LinkSetup(self.settings, self._acks, self._committed, self._snapshotting))

    @property
    def link(self) -> SourceLink | None:
        return self._link

    def stop(self, timeout_s: float) -> tuple[str, ...]:
        """Stop every thread, waiting at most ``timeout_s`` in all; the names of those still running.

        Nothing uncommitted is acked: a thread that does not stop (a commit
        that hangs in the target) is left behind, and its outcome is read
        back from the target by the next run.
        """
        self._stop.set()
        if self._link is not None:
            self._link.close()  # wakes a GET waiting on the server and the Consumer waiting for a batch
        stuck = self.join(timeout_s)
        if self._link is not None:
            self._link.close()
        for name in stuck:
            self._log.error("job.thread_stuck", thread=name, waited_s=timeout_s)
        return stuck

    def join(self, timeout_s: float) -> tuple[str, ...]:
        """Wait at most ``timeout_s`` in all for the threads to end (once stopping); those still running."""
        # Every thread watches the stop event, so they wind down together: one deadline for all.
        deadline = time.monotonic() + timeout_s
        threads: list[Worker | Channel] = [*self._workers, *list(self.channels)]
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        heartbeat = self.heartbeat
        if heartbeat is not None and not heartbeat.join(max(deadline - time.monotonic(), 0.0)):
            self._log.warning("heartbeat.left_writing")  # (not stuck: nothing of the job waits for it)
            self.heartbeat = None  # (said once: a later join of this run does not wait for it again)
        cuts = self.cuts
        if cuts is not None and not cuts.join(max(deadline - time.monotonic(), 0.0)):
            self._log.warning("cuts.left_publishing")  # (the cut log serialises it with the next run's)
            self.cuts = None
        return self.still_running()

    def still_running(self) -> tuple[str, ...]:
        """Threads of this run that have not ended yet (after :meth:`stop`: the stuck ones)."""
        running = [worker.name for worker in self._workers if worker.alive]
        return tuple(running + [f"channel-{channel.source}" for channel in list(self.channels) if channel.alive])
