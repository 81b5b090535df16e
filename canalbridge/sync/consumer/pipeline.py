"""The commits a job hands to its channels: one in flight at a time, landed in order, failures read back.

The Consumer hands a transaction to every channel (:meth:`CommitPipeline.hand_over`)
and reads on; the pipeline holds that commit until every channel answered
(:meth:`CommitPipeline.land`), advances each channel's committed position,
and says what may be acked: the cut, if every channel committed. A
channel whose commit reported failure may still have landed it (the Spark
JVM died after Iceberg wrote the snapshot): before the replay, the
pipeline reads its target back (:meth:`CommitPipeline.settle`) so that
what landed is skipped. In a job whose cuts are atomic (``[job.cuts]
atomic``) the channels stage their commits and the pipeline publishes them
all in one catalog commit (:class:`~canalbridge.sync.channel.sink.CatalogPublisher`)
once every channel staged its own: readers see every target move at once.
Acks, counters and the log stay with the Consumer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.channel.sink import CatalogPublisher
from canalbridge.sync.channel.work import Committed, Staged
from canalbridge.sync.errors import ChannelCommitError, PublishFailed
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.tracking import CommittedPositions
from canalbridge.sync.source.link import Outstanding


@dataclass(frozen=True)
class InFlight:
    """A commit handed to the channels whose outcome has not been taken in yet."""

    cut: Position
    label: str
    reason: str
    started: float  # time.monotonic()
    futures: dict[str, Future[Committed]]  # by channel source
    outstanding: Outstanding  # what the source held for this client at the cut: acked once it lands
    whole: bool = True  # cut between source transactions

    def done(self) -> bool:
        return all(future.done() for future in self.futures.values())


@dataclass(frozen=True)
class Outcome:
    """How a commit ended: the channels that wrote rows, and those that failed (the first failure's error)."""

    commit: InFlight
    written: tuple[str, ...]
    failed: frozenset[str]
    failure: ChannelCommitError | None
    seconds: float


class CommitPipeline:
    """Owns the commit in flight and what earlier commits left: the last cut, the last cut that landed, and
    the channels whose last commit failed. Used by the Consumer thread only."""

    def __init__(self, channels: Mapping[str, Channel], committed: CommittedPositions, timeout_s: float, *,
                 publisher: CatalogPublisher | None = None) -> None:
        """``publisher``: the catalog commit that makes the channels' staged writes current (atomic cuts)."""
        self._publisher = publisher
        self._channels = channels  # the Consumer's, live: a channel opened mid-run commits from its next cut
        self._committed = committed
        self._timeout_s = timeout_s
        self._in_flight: InFlight | None = None
        self._last_cut: Position | None = None  # the latest commit's cut, landed or not
        self._landed_cut: Position | None = None  # the latest cut every channel committed: acks go no further
        self._unsettled: dict[str, str] = {}  # channels whose last commit failed (-> its label): did it land?
        # Staged writes of a publish the catalog refused: deleted once their targets, read back, show them absent.
        self._refused: dict[str, Staged] = {}

    @property
    def in_flight(self) -> InFlight | None:
        return self._in_flight

    @property
    def last_cut(self) -> Position | None:
        return self._last_cut

    @property
    def landed_cut(self) -> Position | None:
        return self._landed_cut

    @property
    def unsettled(self) -> set[str]:
        """The channels whose last commit reported failure and has not been read back."""
        return set(self._unsettled)

    def hand_over(self, cut: Position, label: str, reason: str, outstanding: Outstanding, *,
                  whole: bool = True) -> None:
        """Commit every channel's open transaction through ``cut``; the next may begin at once. ``whole``: the
        cut splits no source transaction (see :class:`InFlight`)."""
        assert self._in_flight is None, "one commit at a time: land the one in flight first"
        futures = {source: channel.commit(cut) for source, channel in self._channels.items()}
        self._in_flight = InFlight(cut, label, reason, time.monotonic(), futures, outstanding, whole)

    def ready(self) -> bool:
        """Whether the commit in flight has an outcome to take in, or has run past the commit timeout (then
        landing it names the channel stuck)."""
        in_flight = self._in_flight
        return in_flight is not None and (
            in_flight.done() or time.monotonic() - in_flight.started >= self._timeout_s)

    def land(self) -> Outcome | None:
        """Wait for the commit in flight (None if there is none) and advance the positions of the channels
        that committed it. :class:`ChannelStuckError` if a channel does not answer in time."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return None
        cut = in_flight.cut
        failures: list[ChannelCommitError] = []
        results: dict[str, Committed] = {}
        for source, future in in_flight.futures.items():
            try:
                results[source] = self._channels[source].await_result(future, f"the commit through {cut}",
                                                                      since=in_flight.started)
            except ChannelCommitError as exc:
                failures.append(exc)
        staged = {source: result for source, result in results.items() if isinstance(result, Staged)}
        unpublished: set[str] = set()
        if staged and failures:  # nothing of the cut is published: none of it landed in those targets
            for each in staged.values():
                each.write.discard()
            unpublished = set(staged)
        elif staged:
            failures.extend(self._publish(in_flight.label, staged))
        failed = {failure.channel for failure in failures}
        written = [source for source, result in results.items()
                   if result and source not in failed and source not in unpublished]
        for source in written:
            self._committed.advance(source, cut)
        self._last_cut = cut
        if failures:
            self._unsettled.update({failure.channel: in_flight.label for failure in failures})
        else:
            self._landed_cut = cut
        # (A channel whose staged write was discarded did not land either, though nothing needs reading back.)
        return Outcome(in_flight, tuple(written), frozenset(failed | unpublished),
                       failures[0] if failures else None, time.monotonic() - in_flight.started)

    def _publish(self, label: str, staged: Mapping[str, Staged]) -> list[ChannelCommitError]:
        """Make every channel's staged write current in one catalog commit; the channels whose write did not
        become current for sure, as failures."""
        writes = [each.write for each in staged.values()]
        assert self._publisher is not None, "a channel staged a write in a job that publishes none"
        try:
            self._publisher.publish(writes)
        except Exception as exc:
            # It may have landed all the same: each target's stamp, read back, says (see settle). A refusal may
            # answer the HTTP client's retry of a request that landed, so even its files wait for the read-back;
            # those of another failure stay (the catalog may still apply it): orphan files if it does not.
            if isinstance(exc, PublishFailed) and exc.refused:
                self._refused.update(staged)
            return [ChannelCommitError(source, label, exc) for source in staged]
        for source, each in staged.items():
            self._channels[source].published(each)
        return []

    def settle(self, tell: Callable[[str, bool], None]) -> None:
        """Read back the target of each channel whose last commit failed, and ``tell`` (source, whether the
        commit landed after all) for each, as soon as it is known."""
        futures = {source: self._channels[source].read_committed_position() for source in self._unsettled}
        for source, future in futures.items():
            # ChannelCommitError: retried with back-off like a failed commit (those not read stay unsettled).
            read = self._channels[source].await_result(future, "reading back what landed")
            before = self._committed.get(source)
            self._committed.advance(source, read.position)
            # The table's position moved through the cut; or, for a commit stamped with what the table held
            # already (one that filled what Canal's first pass missed), the table names that very commit.
            last = self._last_cut
            moved = read.position is not None and last is not None and read.position >= last \
                and (before is None or read.position > before)
            label = self._unsettled.pop(source)
            landed = moved or read.label == label
            refused = self._refused.pop(source, None)
            if refused is not None and not landed:
                refused.write.discard()
            tell(source, landed)

    def abort(self, reason: str) -> None:
        """Abort every channel's open transaction (land the commit in flight first)."""
        assert self._in_flight is None, "land the commit in flight before aborting"
        futures = {channel: channel.abort(reason) for channel in self._channels.values()}
        for channel, future in futures.items():
            channel.await_result(future, "the abort")
