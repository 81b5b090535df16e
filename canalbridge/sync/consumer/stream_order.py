"""The order of the positions one epoch of a source sends: where Canal went back, and where it cannot have.

Within one epoch Canal's positions only grow, except in one case: when its
MySQL connection breaks mid-transaction, Canal dumps the binlog again from
the last transaction end it had put and sends that end and all after it a
second time, into the same stream, with no rollback. A position that goes
back further than that, or into a binlog file of another name, cannot be
the same binlog: the source was switched under the job.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from canalbridge.sync.errors import SourceSwitchedError
from canalbridge.sync.model.position import EntryPosition, Position


class StreamOrder:
    """The positions routed in the current epoch. Used by the Consumer thread only."""

    def __init__(self, job: str) -> None:
        self._job = job
        self._high: Position | None = None  # the latest position routed in this epoch
        # The last transaction ends routed in this epoch that closed rows: Canal's second pass never goes back
        # before the first (see check_same_binlog).
        self._sent_ends: collections.deque[Position] = collections.deque(maxlen=3)
        self._rows_since_end = False

    def advance(self, position: Position) -> Position | None:
        """Take ``position`` as the next one routed. If it lies before the latest (Canal sends again), return
        that latest and keep it; else None. :class:`SourceSwitchedError` if it cannot be of the same binlog."""
        high = self._high
        if high is not None and (position < high or position.journal != high.journal):
            self.check_same_binlog(position, high)
            if position < high:
                return high
        self._high = position
        return None

    @property
    def high(self) -> Position | None:
        """The latest position routed in this epoch."""
        return self._high

    @property
    def rows_since_end(self) -> bool:
        """Whether a row change was routed since the last transaction end."""
        return self._rows_since_end

    def routed_in_order(self, last: Position, ends: Sequence[Position], rows_since_end: bool) -> None:
        """Entries past the latest, through ``last``, were routed in order (a fast lane's stretch): ``ends``
        are the transaction ends among them that closed rows, oldest first (the last few are enough)."""
        self._high = last
        self._sent_ends.extend(ends)
        self._rows_since_end = rows_since_end

    def rows(self) -> None:
        """A row change was routed: the next transaction end closes rows."""
        self._rows_since_end = True

    def transaction_end(self, position: Position) -> None:
        if self._rows_since_end:
            self._sent_ends.append(position)
            self._rows_since_end = False

    def new_epoch(self) -> None:
        """The source starts again from its ack cursor: nothing was routed in the new epoch."""
        self._high = None
        self._sent_ends.clear()
        self._rows_since_end = False

    def check_same_binlog(self, position: Position, high: Position) -> None:
        """Raise :class:`SourceSwitchedError` unless ``position``, sent after ``high`` in one connection, can
        be of the same binlog: a file of the same name, and (going back) no further than Canal's second pass goes.

        Canal's parser dumps again from the last transaction end it recorded.
        It records the end of each flush it put into the store, just after the
        put, but not an end that is alone in its flush (a transaction with no
        rows for this client, or one whose rows filled the parser's buffer just
        before its end). So only ends that closed rows count here, and the
        recorded one may trail them by two: the put not yet recorded, and one
        end alone in its flush.
        """
        if not isinstance(position, EntryPosition) or not isinstance(high, EntryPosition):
            return  # (a Kafka topic: Canal's parser is not what orders its partitions)
        ends = self._sent_ends
        if len(ends) == ends.maxlen and position < ends[0]:
            raise SourceSwitchedError(self._job, position, high)
        if position.from_another_binlog_than(high):
            raise SourceSwitchedError(self._job, position, high)
