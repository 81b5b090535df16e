"""The Consumer: routes Canal entries to channels, commits them together, and acks Canal.

One *transaction* of the Consumer spans any number of Canal batches. It
begins on every channel, gives each ROWDATA entry to the channel of its
``schema.table`` unless that channel holds it already
(:mod:`canalbridge.sync.consumer.delivery`) and, when the commit policy says so,
commits every channel through the same clean cut
(:mod:`canalbridge.sync.consumer.source_txns`, :mod:`canalbridge.sync.consumer.pipeline`). Only
if every channel committed does it ack Canal, oldest batch first, and only
the batches that lie wholly at or before the cut
(:mod:`canalbridge.sync.consumer.taken`); the rest of a batch cut in the middle is
carried into the next transaction. If any channel fails, the others are
aborted, Canal is rolled back to its ack cursor and the data is consumed
again; channels that had committed skip what they hold, so nothing is
applied twice. A snapshot's chunks ride the same transactions (Delivery
hands each to its channel where the stream closes its window).

Commits overlap reading (``commit.overlap``): once transaction N is handed
to the channels, the Consumer begins N+1 and routes into it while N is
applied. N+1 commits only after N has *landed*, and acks go out in order
as each lands; if N failed, N+1 is aborted with it. While N runs, N+1 may
grow past its thresholds (:meth:`CommitPolicy.cut_reason`).

When Canal sends part of the binlog again in the same stream (its MySQL
connection broke: :mod:`canalbridge.sync.consumer.stream_order`), the Consumer
drops its open transaction, rolls Canal back, and in the replay skips the
entries of the first pass that the second sends again; their batches are
acked without waiting for them, or Canal's store would stay full (through
the last cut every channel committed, never a failed commit's). What the
first pass missed behind a commit is filled in from the second
(:mod:`canalbridge.sync.consumer.second_pass`).

Its length: the Consumer's loop and its cut, commit, ack and rollback steps read the state each
other leave, so they stay one class; what stands alone (taken batches, transaction ends, stream
order, the second pass, the policy, the pipeline, delivery) is in the modules beside it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence

import structlog
from tenacity import RetryError

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.channel.sink import CatalogPublisher
from canalbridge.sync.consumer.delivery import Delivery
from canalbridge.sync.consumer.lane import Lanes
from canalbridge.sync.consumer.pipeline import CommitPipeline
from canalbridge.sync.consumer.policy import CommitPolicy, PendingWork
from canalbridge.sync.consumer.second_pass import SecondPass
from canalbridge.sync.consumer.source_txns import SourceTransactions
from canalbridge.sync.consumer.stream_order import StreamOrder
from canalbridge.sync.consumer.taken import Taken
from canalbridge.sync.errors import ChannelStuckError, Stopping, SyncError
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.model.stats import ConsumerStats
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.model.tracking import AckState, CommittedPositions
from canalbridge.sync.retry import retrying
from canalbridge.sync.schema.rows import DML_EVENTS
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.snapshot.windows import Windows
from canalbridge.sync.source.link import ConsumerSide, TakenBatch
from canalbridge.sync.worker import Worker

log = structlog.get_logger("canalbridge.consumer")

EventType = entry_pb.EventType
# Plain ints: attribute lookups on protobuf enum wrappers are slow in a per-entry loop.
_END = int(entry_pb.EntryType.TRANSACTIONEND)
_ROWDATA = int(entry_pb.EntryType.ROWDATA)


class Consumer(Worker):
    """Owns the transaction loop; runs in its own thread."""

    def __init__(
        self,
        settings: JobSettings,
        link: ConsumerSide,
        channels: Sequence[Channel],
        committed: CommittedPositions,
        acks: AckState,
        stop: threading.Event,
        on_failure: Callable[[SyncError], None],
        on_commit: Callable[[], None] | None = None,
        stats: ConsumerStats | None = None,
        open_channel: Callable[[ChannelSettings], Channel] | None = None,
        windows: Windows | None = None,
        heartbeat: Callable[[], None] | None = None,
        on_whole_cut: Callable[[str, Position], None] | None = None,
        publisher: CatalogPublisher | None = None,
    ) -> None:
        """``heartbeat`` asks for a heartbeat row (:mod:`canalbridge.sync.consumer.heartbeat`), if the job
        writes them. ``on_whole_cut(label, cut)``: every channel committed through ``cut``, which splits no
        source transaction, so every target holds the source as it stood there (until the next commit).
        ``publisher``: the channels stage their commits, and it makes them current in one catalog commit."""
        super().__init__(f"consumer-{settings.name}", stop)
        self.settings = settings
        self._on_commit = on_commit
        self._on_whole_cut = on_whole_cut
        self._heartbeat = heartbeat
        self.job = settings.name
        self.link = link
        self._log = log.bind(job=self.job)
        self._run_id = uuid.uuid4().hex[:8]
        self.committed = committed
        self.acks = acks
        self.policy = CommitPolicy(settings.commit, link.store_get_size)
        self.stats = stats or ConsumerStats()
        self._second = SecondPass(self._log)  # what a stream that went back leaves to do
        self._delivery = Delivery(settings, channels, committed, open_channel, self._second, self.stats, self._log,
                                  windows)
        self.channels = self._delivery.channels
        self._on_failure = on_failure
        self._taken = Taken(link)  # from the source in the link's current epoch, not acked yet
        self._last_position: Position | None = None
        self._order = StreamOrder(self.job)  # of the positions routed in this epoch
        self._txns = SourceTransactions(self._order, marks=link.marks_transactions)
        self._lanes = Lanes(self._delivery, self._order, self._second, self.policy, self.stats)
        # The commit applied while the next transaction reads, and what earlier ones left.
        self._commits = CommitPipeline(self.channels, committed, settings.commit.commit_timeout_seconds,
                                       publisher=publisher)

    # -- lifecycle ------------------------------------------------------------------

    def _run(self) -> None:
        retry = retrying(
            self.settings.commit.commit_retry, lambda exc: isinstance(exc, SyncError) and exc.transient,
            self._stop, self._log, "consumer.retrying", on_retry=self._count_retry,
        )
        try:
            while not self._stop.is_set():
                retry(self._attempt)
        except Stopping:
            pass
        except RetryError as exc:
            self._give_up(exc.last_attempt.exception(), exc.last_attempt.attempt_number)
        except SyncError as exc:
            self._give_up(exc, 1)
        self._log.info("consumer.stopped", commits=self.stats.commits, rollbacks=self.stats.rollbacks)

    def _attempt(self) -> None:
        """Transactions until one lands or is voided; a failure is recovered from (abort, roll back)
        before it is retried.

        With commits overlapping, a transaction's commit lands (or fails) while
        the next one is read: the attempt lasts until then, so that a commit
        that keeps failing uses up the retries and pauses the job.
        """
        landed = self.stats.commits
        try:
            while self._transaction() and self._commits.in_flight is not None and self.stats.commits == landed:
                pass
        except ChannelStuckError:
            raise  # not retried: the job pauses, and its next run starts from the ack cursor
        except SyncError as exc:
            self._recover(exc)
            raise

    def _count_retry(self) -> None:
        self.stats.retries += 1

    def _give_up(self, exc: BaseException | None, attempts: int) -> None:
        self._log.error("consumer.giving_up", error=str(exc), attempts=attempts)
        if isinstance(exc, SyncError):
            self._on_failure(exc)

    # -- one transaction --------------------------------------------------------------

    def _transaction(self) -> bool:
        """Run one transaction to its end: True once committed or voided by a rollback, False if it stopped."""
        self.stats.transactions += 1
        # Unique across runs and processes: a failed commit is told landed by the label the table holds.
        label = f"{self.job}-{self._run_id}-{self.stats.transactions}"
        self._settle_failed_commits()
        self._delivery.begin(label)
        work = PendingWork(started_at=time.monotonic())
        self._last_position = None
        while True:
            if self._stop.is_set():
                return False  # each channel's thread aborts its open transaction as it ends
            if self._commits.ready():
                # Acks go out as soon as the commit before this transaction landed; one that
                # runs past the commit timeout is waited for, which names it stuck.
                self._land()
            starved = False
            carried = self._taken.carried()
            if carried is not None:
                if self._route(carried.entries, work, label, carried.batch_id, carried.positions):
                    return True
            else:
                item = self._taken.take(self.policy.poll_timeout(work, time.monotonic(),
                                                                 committing=self._commits.in_flight is not None))
                starved = item is None and self._taken.starved
                if item is not None:
                    if item.epoch != self._taken.epoch:
                        self._rolled_back(item)
                        return False
                    work.bytes += item.batch.raw_size
                    self.stats.batches += 1
                    self._taken.new_batch()
                    if self._route(item.batch.entries, work, label, item.batch_id, item.positions):
                        return True
            if self._commit_if_due(work, label, starved=starved):
                return True

    def _route(self, entries: Sequence[entry_pb.Entry], work: PendingWork, label: str, batch_id: int,
               positions: Sequence[Position] | None) -> bool:
        """Route entries of one batch; commit after a source transaction end when due. True if it committed.

        ``positions`` are the entries' positions when their headers do not hold them (see TakenBatch). The
        plain stretches go through a fast lane (:mod:`canalbridge.sync.consumer.lane`), the rest one by one.
        """
        resends = self.link.resends_in_stream
        txns = self._txns
        superseded = 0  # entries of Canal's first pass skipped here
        counts_through: Position | None = None  # the last entry routed here that is not among them
        taken = self._taken.last_batch
        lane = (self._lanes.lane(entries, self.link.outstanding)
                if positions is None and self.link.marks_transactions and self._second.quiet else None)
        index, count = 0, len(entries)
        while index < count:
            if lane is not None:
                stop = self._lanes.stretch(lane, index, work, taken, self._commits.in_flight)
                if stop > index:
                    assert lane.last is not None
                    self._last_position = counts_through = lane.last
                    index = stop
                if index == count:
                    break
            at, entry = index, entries[index]
            index += 1
            header = entry.header
            if positions is None:
                position: Position = EntryPosition(header.logfileName, header.logfileOffset, header.executeTime,
                                                   header.gtid)
            else:
                position = positions[at]
            if resends and self._second.first_pass_entry(position):
                # Canal's first pass, which its second pass sends again.
                taken.append(position)
                self.stats.skipped += 1
                superseded += 1
                work.close_source_txn()  # Canal went back to a transaction end: what came before it is whole
                continue
            high = self._order.advance(position)
            if high is not None:
                self._went_back(position, high)
                return True  # voided; the replay starts from the ack cursor
            entry_type = entry.entryType
            missed = resends and self._second.missed(position, transaction_end=entry_type == _END)
            if missed and self._commits.in_flight is not None:
                # What fills a gap counts as committed when its own commit lands, not the one before.
                self._land()
            taken.append(position)
            self._last_position = position
            counts_through = position
            if not work.events:
                self.stats.routed_first(position.execute_time_ms)
            work.events += 1
            self.stats.entries += 1
            if entry_type != _ROWDATA:
                if missed:
                    self._second.fill(position, None)  # a transaction marker: nothing to apply
                cut = txns.marker(work, entry_type, position)
            else:
                if lane is not None:
                    lane.forget_tables()  # (a window, a rename or a channel may come of it)
                table = TableId(header.schemaName, header.tableName)  # (read once: each read makes new strings)
                if header.eventType in DML_EVENTS:
                    cut = txns.rows(work)
                    self._delivery.rows(table, position, entry, missed)
                else:
                    synced = self._delivery.statement(table, position, entry, missed) is not None
                    cut = txns.statement(work, entry, synced=synced)
                    if cut:
                        # A DDL or another statement standing alone (Doris returned here and
                        # dropped the rest of the batch): note it and go on with the batch.
                        self.stats.ddl += 1
                        self._log.info("consumer.ddl", table=".".join(table), synced=synced, position=str(position),
                                       event_type=EventType.Name(header.eventType))
            # A source transaction just ended (or a DDL stood alone): a clean cut point.
            if cut and index < count and self._commit_if_due(work, label):
                self._taken.cut_after(entries, positions, at, batch_id)
                return True
        if superseded:
            # Canal sends those entries again: they must not hold back the batch's ack,
            # or the store stays full and the second pass never comes. (If one is a
            # transaction end past a gap, the ack moves Canal's meta cursor there: a
            # Canal restart before the second pass is committed would skip the gap.)
            # Only through a cut that landed: a failed commit's cut holds nothing.
            self._taken.supersede(batch_id, counts_through)
            self._taken.ack_through(self._commits.landed_cut)
        return False

    def _commit_if_due(self, work: PendingWork, label: str, *, starved: bool = False) -> bool:
        """Commit the open transaction if it is due and may be cut here; True if it did (or was voided)."""
        if self._last_position is None:
            return False
        now = time.monotonic()
        outstanding = self.link.outstanding
        in_flight = self._commits.in_flight
        reason = self.policy.cut_reason(work, outstanding, now, in_flight)
        if reason is None:
            return False
        if in_flight is not None:
            self._land()
        if not self._taken.current:
            # Canal was rolled back under this transaction (a reconnect or a
            # doubted batch): what it holds will come again.
            self._abort_all("canal was rolled back")
            self._taken.forget()
            return True
        if work.in_source_txn:
            committing = in_flight.outstanding if in_flight is not None else None
            split = self.policy.must_split_source_txn(work, outstanding, now, committing, starved=starved)
            if split is None:
                if starved and self._heartbeat is not None:
                    self._heartbeat()  # the source is quiet: a heartbeat's end proves the transaction over
                return False  # wait for the source transaction to end
            self.stats.split_source_txns += 1
            self._log.warning(
                "consumer.splitting_source_txn", reason=split, label=label, position=str(self._last_position)
            )
        # (A source that marks no transaction ends, Kafka's flat messages, never shows a cut between two.)
        self._commit(self._last_position, label, reason,
                     whole=self.link.marks_transactions and not work.in_source_txn)
        return True

    # -- commit, ack, recover -------------------------------------------------------------

    def _commit(self, cut: Position, label: str, reason: str, *, whole: bool) -> None:
        """Hand the transaction to the channels; with ``commit.overlap`` off, also wait for it to land."""
        self._commits.hand_over(cut, label, reason, self.link.outstanding, whole=whole)
        self.stats.handed_over()
        if not self.settings.commit.overlap:
            self._land()

    def _land(self, *, raise_failure: bool = True) -> None:
        """Wait for the commit in flight; ack Canal through its cut, or take in what failed.

        A failure is raised (the transaction open meanwhile is then aborted
        with it), unless the caller is aborting anyway (``raise_failure``
        False): the replay then meets the failure again if it lasts.
        """
        outcome = self._commits.land()
        if outcome is None:
            return
        commit = outcome.commit
        self._second.committed(commit.cut, set(outcome.failed), set(self.channels))
        self._delivery.landed(commit.label, set(outcome.failed))
        if outcome.failure is not None:
            if raise_failure:
                raise outcome.failure
            self._log.warning("consumer.commit_failed", label=commit.label, error=str(outcome.failure))
            return
        acked = self._taken.ack_through(commit.cut)
        self.stats.landed(outcome.seconds)
        if self._on_commit is not None:
            self._on_commit()
        # (Not while a table refills what a first pass missed: it lacks changes behind the cut.)
        if commit.whole and not self._second.refilling and self._on_whole_cut is not None:
            self._on_whole_cut(commit.label, commit.cut)
        self._log.info(
            "consumer.committed", label=commit.label, reason=commit.reason, position=str(commit.cut),
            channels=list(outcome.written), batches_to_ack=acked, seconds=round(outcome.seconds, 3),
        )

    def _settle_failed_commits(self) -> None:
        """Learn from the targets whether commits that reported failure landed, before replaying."""
        self._commits.settle(lambda source, landed: self._second.settled(source, landed, self._commits.last_cut))

    def _abort_all(self, reason: str) -> None:
        self._land(raise_failure=False)  # what it leaves unsettled is read back before the replay
        self._second.aborted(self._commits.unsettled)
        self._commits.abort(reason)
        self._delivery.aborted()

    def _recover(self, exc: SyncError) -> None:
        """Abort the transaction and roll Canal back to its ack cursor."""
        self.stats.rollbacks += 1
        self._log.warning("consumer.rollback", error=str(exc), ack_position=str(self.acks.position))
        self._abort_all(f"rollback: {exc}")
        self._new_epoch(self.link.rollback())

    def _went_back(self, position: Position, high: Position) -> None:
        """Canal sent ``position`` after ``high`` in one epoch: its parser dumped the binlog again."""
        self._land(raise_failure=False)  # the last cut must be known
        self.stats.went_back += 1
        self.stats.rollbacks += 1
        self._log.warning("consumer.canal_went_back", position=str(position), after=str(high),
                          ack_position=str(self.acks.position))
        last_cut = self._commits.last_cut
        if last_cut is not None and position < last_cut:
            # Committed past where Canal went back (a split source transaction or a DDL cut), or tried
            # to: what the first pass missed before that commit is filled in from the second.
            self._log.warning("consumer.canal_went_back_behind_a_commit", position=str(position),
                              cut=str(last_cut), landed=last_cut == self._commits.landed_cut)
        # The replay brings again, from the ack cursor, what this epoch took and did
        # not ack, in the same order: those at or after ``position`` are the first pass.
        again = self._taken.count_from(position)
        self._abort_all("canal sent entries again in the same stream")
        self._new_epoch(self.link.rollback())
        self._second.went_back(position, self._taken.epoch, again)

    def _new_epoch(self, epoch: int, waiting: TakenBatch | None = None) -> None:
        """The source starts again from its ack cursor in ``epoch``; ``waiting``: its first batch, taken."""
        self._taken.new_epoch(epoch, waiting)
        self._order.new_epoch()
        self._second.new_epoch(epoch)

    def _rolled_back(self, item: TakenBatch) -> None:
        """Canal was rolled back (a reconnect or a doubted batch): start over from the ack cursor."""
        if self._taken.carries:
            self._log.info("consumer.reset_after_rollback", epoch=item.epoch)
        self._abort_all("canal was rolled back")
        self._new_epoch(item.epoch, item)
