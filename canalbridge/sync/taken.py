"""What the Consumer took from its source in this epoch and has not acked yet.

The positions of each batch taken, oldest first (how many of them the
second pass sends again, when Canal goes back), the rest of a batch that
a commit cut in the middle (carried into the next transaction), and a
batch taken but not routed yet (the first of a new epoch). Used by the
Consumer thread only.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.position import Position, TakenPositions
from canalbridge.sync.source import TakenBatch


@dataclass(frozen=True)
class Carried:
    """The entries after a mid-batch cut: what the next transaction routes first."""

    entries: list[entry_pb.Entry]
    positions: Sequence[Position] | None  # theirs, when the batch gave them (see TakenBatch)
    batch_id: int  # the batch they came in


class Taken:
    """The batches of this epoch not acked yet, what a cut carried over, and a batch waiting to be routed."""

    def __init__(self) -> None:
        self._batches: collections.deque[TakenPositions] = collections.deque()
        self._carried: Carried | None = None
        self.next: TakenBatch | None = None  # taken but not yet routed

    @property
    def carries(self) -> bool:
        return self._carried is not None

    def new_batch(self) -> TakenPositions:
        """A batch taken from the source: the positions of its entries are noted as they are routed."""
        positions = TakenPositions()
        self._batches.append(positions)
        return positions

    @property
    def last_batch(self) -> TakenPositions:
        return self._batches[-1]

    def carried(self) -> Carried | None:
        """What a cut carried over (once), its batch still counted as taken."""
        carried, self._carried = self._carried, None
        if carried is not None and not self._batches:
            # Its batch cannot have been acked: it holds entries past the cut.
            self._batches.append(TakenPositions())
        return carried

    def cut_after(self, entries: list[entry_pb.Entry], positions: Sequence[Position] | None, index: int,
                  batch_id: int) -> None:
        """A commit cut the batch after ``entries[index]``: the rest is carried into the next transaction."""
        self._carried = Carried(entries[index + 1:], positions[index + 1:] if positions is not None else None,
                                batch_id)

    def acked(self, batches: int) -> None:
        """The oldest ``batches`` were asked to be acked."""
        for _ in range(min(batches, len(self._batches))):
            self._batches.popleft()

    def count_from(self, position: Position) -> int:
        """How many entries taken and not acked lie at or after ``position``."""
        return sum(batch.count_from(position) for batch in self._batches)

    def forget(self) -> None:
        """Drop what was carried over and a batch waiting to be routed: the source sends them again."""
        self._carried = None
        self.next = None

    def clear(self) -> None:
        """A new epoch: nothing was taken in it."""
        self._batches.clear()
        self.forget()
