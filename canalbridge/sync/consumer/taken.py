"""What the Consumer took from its source in this epoch and has not acked yet, and its acks in that epoch.

The positions of each batch taken, oldest first (how many of them the
second pass sends again, when Canal goes back), the rest of a batch that
a commit cut in the middle (carried into the next transaction), and a
batch taken but not routed yet (the first of a new epoch). Acks are asked
of the link in the epoch this holds, so that none reaches a later one.
Used by the Consumer thread only.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.source.link import ConsumerSide, TakenBatch

# The source counts as starved once it handed out nothing for this long (see
# CommitPolicy.must_split_source_txn): the room an ack makes takes a round trip to show.
STARVED_AFTER_S = 1.0


@dataclass(frozen=True)
class Carried:
    """The entries after a mid-batch cut: what the next transaction routes first."""

    entries: Sequence[entry_pb.Entry]
    positions: Sequence[Position] | None  # theirs, when the batch gave them (see TakenBatch)
    batch_id: int  # the batch they came in


class Taken:
    """The link's epoch the Consumer reads, the batches of it not acked yet, what a cut carried over, and a
    batch waiting to be routed."""

    def __init__(self, link: ConsumerSide, clock: Callable[[], float] = time.monotonic) -> None:
        self._link = link
        self._clock = clock
        self.epoch = link.epoch
        self._batches: collections.deque[BatchPositions] = collections.deque()
        self._carried: Carried | None = None
        self._next: TakenBatch | None = None  # taken but not yet routed
        self._waiting_since = self._clock()  # since the link last handed out a batch, or an ack made room

    def take(self, timeout_s: float) -> TakenBatch | None:
        """The batch waiting to be routed, else the link's next (None after ``timeout_s``): of any epoch."""
        waiting, self._next = self._next, None
        item = waiting or self._link.take(timeout_s)
        if item is not None:
            self._waiting_since = self._clock()
        return item

    @property
    def starved(self) -> bool:
        """Whether the link has handed out nothing, and no ack made room, for ``STARVED_AFTER_S``."""
        return self._clock() - self._waiting_since >= STARVED_AFTER_S

    @property
    def current(self) -> bool:
        """Whether the link is still in this epoch, with no rollback pending."""
        return self._link.is_current(self.epoch)

    @property
    def carries(self) -> bool:
        return self._carried is not None

    def new_batch(self) -> BatchPositions:
        """A batch taken from the source: the positions of its entries are noted as they are routed."""
        positions = BatchPositions()
        self._batches.append(positions)
        return positions

    @property
    def last_batch(self) -> BatchPositions:
        return self._batches[-1]

    def carried(self) -> Carried | None:
        """What a cut carried over (once), its batch still counted as taken."""
        carried, self._carried = self._carried, None
        if carried is not None and not self._batches:
            # Its batch cannot have been acked: it holds entries past the cut.
            self._batches.append(BatchPositions())
        return carried

    def cut_after(self, entries: Sequence[entry_pb.Entry], positions: Sequence[Position] | None, index: int,
                  batch_id: int) -> None:
        """A commit cut the batch after ``entries[index]``: the rest is carried into the next transaction."""
        self._carried = Carried(entries[index + 1:], positions[index + 1:] if positions is not None else None,
                                batch_id)

    def ack_through(self, cut: Position | None) -> int:
        """Ask the link to ack the oldest batches that lie wholly at or before ``cut``; how many."""
        batches = self._link.ack_through(self.epoch, cut)
        self._waiting_since = self._clock()  # the room these acks make takes a round trip to show
        for _ in range(min(batches, len(self._batches))):
            self._batches.popleft()
        return batches

    def supersede(self, batch_id: int, counts_through: Position | None) -> None:
        """Only the batch's entries through ``counts_through`` hold back its ack: the rest come again."""
        self._link.supersede(self.epoch, batch_id, counts_through)

    def count_from(self, position: Position) -> int:
        """How many entries taken and not acked lie at or after ``position``."""
        return sum(batch.count_from(position) for batch in self._batches)

    def forget(self) -> None:
        """Drop what was carried over and a batch waiting to be routed: the source sends them again."""
        self._carried = None
        self._next = None

    def new_epoch(self, epoch: int, waiting: TakenBatch | None = None) -> None:
        """The link starts again from its ack cursor in ``epoch``: nothing was taken in it, but ``waiting``
        (its first batch, taken already and routed next)."""
        self.epoch = epoch
        self._batches.clear()
        self._carried = None
        self._next = waiting


class BatchPositions:
    """The positions of one batch's entries, in the order routed.

    Kept as a list of journal names and one of offsets: a list of positions
    would keep an object per entry alive, a whole Canal store's worth, for
    the garbage collector to walk again and again.
    """

    __slots__ = ("_journals", "_offsets")

    def __init__(self) -> None:
        self._journals: list[str] = []
        self._offsets: list[int] = []

    def append(self, position: Position) -> None:
        self._journals.append(position.journal)
        self._offsets.append(position.offset)

    def extend(self, journal: str, offsets: list[int]) -> None:
        """Entries of binlog file ``journal`` at ``offsets``, in order."""
        self._journals.extend(itertools.repeat(journal, len(offsets)))
        self._offsets.extend(offsets)

    def count_from(self, position: Position) -> int:
        """How many of the positions are at or after ``position``."""
        return sum(1 for journal, offset in zip(self._journals, self._offsets)
                   if EntryPosition(journal, offset) >= position)
