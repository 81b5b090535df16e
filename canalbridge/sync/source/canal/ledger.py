"""What this client knows of its batches on Canal, and the proof that they are contiguous.

Canal hands a client batches with ``getWithoutAck``; each stays outstanding
on the server until acked (oldest first) or rolled back. A GET from a
connection that died can still be served *after* the client's rollback on
its new connection: its batch takes the entries right after the ack cursor
and sits outstanding, handed to nobody. A client that commits the next
batch it receives has then committed across a gap, and loses those rows.

The ledger accepts a batch only with proof that nothing lies between it and
what was acked. The proofs hold for every meta manager of Canal 1.1.x
(memory, file, period and mixed keep ``MemoryClientIdentityBatch``'s
counter; ZooKeeper's sequential nodes count the same way):

- batch ids of a client identity come from one counter that only grows
  while the server runs and starts at 1 when it starts; an empty GET takes
  no id. So within an epoch each batch must carry the previous id + 1, and
  the first batch after a rollback must carry the last id this client saw
  + 1 (or 1, from a server that restarted): any other id means a GET this
  client never received took entries.
- after a rollback the replay starts at the ack cursor, so its first entry
  can be no later than the first entry of the oldest batch that was not yet
  acked (earlier is a Canal restart re-delivering a transaction).

Anything else is a *doubt*: the batch is refused, every batch handed out in
the epoch is void, and Canal is rolled back again. A run of doubts with no
accepted batch between them cannot be a stale GET (each dead connection has
at most one) and is reported as an error.

The ledger is plain data with no I/O and no lock: :class:`CanalLink` owns it
and calls it under its own lock.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from enum import Enum

from canalbridge.sync.model.position import EntryPosition, PositionRange
from canalbridge.sync.source.link import Outstanding

#: consecutive doubts (no batch accepted between them) before the job gives up
MAX_DOUBTS = 8
#: after a reconnect, how many idle polls roll Canal back once more, so that a
#: dead connection's GET that took the last entries cannot stall the job
IDLE_ROLLBACK_POLLS = 10


@dataclass(frozen=True)
class LedgerBatch:
    """A batch accepted from Canal and not yet acked."""

    epoch: int
    batch_id: int
    range: PositionRange
    entries: int
    raw_size: int


class Verdict(Enum):
    ACCEPTED = "accepted"
    DOUBTED = "doubted"  # refused; Canal must be rolled back
    STALE = "stale"  # taken before the last rollback: dropped, only its id is kept


@dataclass(frozen=True)
class Doubt:
    """Why a batch was refused, for the log and for the error after too many."""

    batch_id: int
    reason: str


class BatchLedger:
    """Epochs, outstanding batches and pending acks of one client identity."""

    def __init__(self) -> None:
        self.epoch = 0
        self.last_seen_id: int | None = None  # None: no batch seen by this process yet
        self._epoch_last_id: int | None = None  # last id accepted since the last rollback
        self._replay_no_later_than: EntryPosition | None = None
        self._unacked: collections.deque[LedgerBatch] = collections.deque()
        self._consumed = 0  # how many of _unacked the Consumer has taken
        # Batches holding entries Canal sends again later in the stream (see the Consumer):
        # batch -> the last entry that counts (None: none does), used instead of range.end.
        self._ack_ends: dict[LedgerBatch, EntryPosition | None] = {}
        self._to_ack: list[LedgerBatch] = []  # ack asked for, not yet sent
        self._sent: list[LedgerBatch] = []  # ack sent, not yet known to have landed
        # The newest ack sent on a connection that died before a reply proved it:
        # a replay that starts after it proves it landed.
        self._uncertain: LedgerBatch | None = None
        self._proven: LedgerBatch | None = None
        self.rollback_due = False
        self.doubts: list[Doubt] = []  # since the last accepted batch
        self.idle_rollbacks_left = 0

    # -- the connection ----------------------------------------------------------------

    def reset(self, *, reconnected: bool) -> int:
        """Everything handed out so far is void: start a new epoch and ask for a rollback.

        Called when the Consumer rolls back after a failed commit, when a
        batch is doubted, and (``reconnected``) when a new connection opens;
        acks not yet known to have landed are forgotten then, because a
        rollback makes Canal send those entries again and the channels skip
        what they committed.
        """
        self.epoch += 1
        if self._unacked:
            # The replay starts at the ack cursor, which is at or before this entry.
            self._replay_no_later_than = self._unacked[0].range.start
        self._unacked.clear()
        self._consumed = 0
        if reconnected:
            if self._sent:
                self._uncertain = self._sent[-1]
            self._to_ack.clear()
            self._sent.clear()
            self.idle_rollbacks_left = IDLE_ROLLBACK_POLLS
        held = {*self._to_ack, *self._sent, self._uncertain, self._proven}
        self._ack_ends = {batch: end for batch, end in self._ack_ends.items() if batch in held}
        self.rollback_due = True
        return self.epoch

    def rolled_back(self) -> None:
        """The rollback was sent: the next batch starts a new run of ids."""
        self.rollback_due = False
        self._epoch_last_id = None

    # -- GET replies ---------------------------------------------------------------------

    def receive(self, epoch_at_get: int, batch_id: int, range_: PositionRange, entries: int,
                raw_size: int) -> tuple[Verdict, LedgerBatch | None]:
        """Judge a non-empty batch returned by a GET sent in ``epoch_at_get``."""
        expected = self._expected_id()
        self.last_seen_id = batch_id
        if epoch_at_get != self.epoch or self.rollback_due:
            return Verdict.STALE, None
        reason = None
        if expected is not None and batch_id != expected and not (self._epoch_last_id is None and batch_id == 1):
            reason = f"batch id {batch_id} where {expected} was due: a GET this client never received took entries"
        elif expected is None and batch_id != 1:
            reason = f"batch id {batch_id} with no id seen before it: cannot prove nothing was taken before it"
        elif self._epoch_last_id is None and self._replay_no_later_than is not None \
                and range_.start > self._replay_no_later_than:
            reason = (f"replay starts at {range_.start}, after the first unacked entry "
                      f"{self._replay_no_later_than}: entries between them were taken by another GET")
        if reason is not None:
            self.doubts.append(Doubt(batch_id, reason))
            self.reset(reconnected=False)
            return Verdict.DOUBTED, None
        batch = LedgerBatch(self.epoch, batch_id, range_, entries, raw_size)
        if self._epoch_last_id is None and self._uncertain is not None:
            if range_.start > self._uncertain.range.end:
                self._proven = self._uncertain  # the replay starts past it: Canal took that ack
            self._uncertain = None
        self._epoch_last_id = batch_id
        self._replay_no_later_than = None
        self.doubts.clear()
        self._unacked.append(batch)
        return Verdict.ACCEPTED, batch

    def _expected_id(self) -> int | None:
        if self._epoch_last_id is not None:
            return self._epoch_last_id + 1
        return None if self.last_seen_id is None else self.last_seen_id + 1

    def idle(self) -> None:
        """A GET came back empty: after a reconnect, roll back while nothing is outstanding.

        A dead connection's GET served after our rollback may have taken the
        last entries; with nothing after them no id gap would ever show it.
        Rolling back while this client holds nothing costs nothing and puts
        those entries back. No epoch starts: with nothing held, everything
        taken was acked, and Canal goes on after it (a Canal that dropped acks
        would send them again, and the Consumer would take that for a stream
        going back).
        """
        if self.idle_rollbacks_left > 0 and not self.holds_anything:
            self.idle_rollbacks_left -= 1
            self.rollback_due = True

    # -- the Consumer's side ---------------------------------------------------------------

    def consumed(self, batch: LedgerBatch) -> None:
        """The Consumer took ``batch`` (the oldest it has not taken)."""
        if batch.epoch == self.epoch:
            self._consumed += 1

    def supersede(self, epoch: int, batch_id: int, counts_through: EntryPosition | None) -> None:
        """Only entries of the batch through ``counts_through`` (None: none) must be committed before its ack.

        The rest of the batch is Canal's first pass after its MySQL connection
        broke: Canal sends those entries again later in the stream.
        """
        if epoch != self.epoch:
            return
        for batch in self._unacked:
            if batch.batch_id == batch_id:
                self._ack_ends[batch] = counts_through

    def ack_through(self, epoch: int, cut: EntryPosition | None) -> list[LedgerBatch]:
        """Ask to ack, oldest first, the taken batches whose entries that count lie at or before ``cut``."""
        if epoch != self.epoch or self.rollback_due:
            return []  # rolled back meanwhile: those ids are gone on the server
        ready = []
        while self._consumed:
            end = self.ack_end(self._unacked[0])
            if end is not None and (cut is None or end > cut):
                break
            ready.append(self._unacked.popleft())
            self._consumed -= 1
        self._to_ack.extend(ready)
        return ready

    def ack_end(self, batch: LedgerBatch) -> EntryPosition | None:
        """The last entry of ``batch`` that must be committed before it is acked (None: none must)."""
        return self._ack_ends.get(batch, batch.range.end)

    @property
    def outstanding(self) -> Outstanding:
        """The batches the Consumer took whose ack was not asked for."""
        batches = list(self._unacked)[: self._consumed]
        return Outstanding(sum(batch.entries for batch in batches), sum(batch.raw_size for batch in batches))

    @property
    def holds_anything(self) -> bool:
        return bool(self._unacked or self._to_ack or self._sent)

    # -- acks on the wire ------------------------------------------------------------------

    def acks_to_send(self) -> list[LedgerBatch]:
        batches, self._to_ack = self._to_ack, []
        return batches

    def acks_sent(self, batches: list[LedgerBatch]) -> None:
        self._sent.extend(batches)

    def acks_landed(self) -> EntryPosition | None:
        """A reply came to a request sent after the acks: Canal took them. Where the acked entries end.

        That is the latest entry that counts of those batches: what Canal will
        send again does not count.
        """
        landed, self._sent = self._sent, []
        proven, self._proven = self._proven, None
        ends = [end for batch in (landed or ([proven] if proven else []))
                if (end := self._ack_ends.pop(batch, batch.range.end)) is not None]
        return max(ends) if ends else None
