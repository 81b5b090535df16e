"""Where a restarted Canal may start again: the transaction boundaries this process took from it.

Canal moves a client's meta cursor, on each ack, to the last transaction
boundary of the acked batches (a BEGIN, an END, a DDL), and a restarted
Canal dumps the binlog again from that entry: so the first entry a
restarted Canal sends behind the last ack is one of those boundaries, the
very entry taken before, with its position and its time. An entry that
is not one of them, from the stretch of binlog this process remembers, is
another binlog's (a failover to a promoted replica whose file numbers trail
the old server's): positions no longer compare.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import DML_EVENTS

_BEGIN = int(entry_pb.EntryType.TRANSACTIONBEGIN)
_END = int(entry_pb.EntryType.TRANSACTIONEND)
_ROWDATA = int(entry_pb.EntryType.ROWDATA)
#: boundaries remembered: many flush periods of Canal's meta cursor, even for small transactions
LIMIT = 100_000

_Key = tuple[str, int, int]  # journal, offset, execute time


def _key(entry: entry_pb.Entry) -> _Key:
    header = entry.header
    return header.logfileName, header.logfileOffset, header.executeTime


class SeenBoundaries:
    """The boundaries of the last :data:`LIMIT` ones taken, oldest first; used under the link's lock."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._order: collections.deque[_Key] = collections.deque()
        self._known: set[_Key] = set()
        self._limit = limit

    def note(self, entries: Sequence[entry_pb.Entry]) -> None:
        """Remember the boundaries among ``entries`` (a batch that was accepted)."""
        for entry in entries:
            entry_type = entry.entryType
            if entry_type == _ROWDATA and entry.header.eventType in DML_EVENTS:
                continue  # (the common case first)
            if entry_type in (_BEGIN, _END, _ROWDATA):
                key = _key(entry)
                if key not in self._known:
                    self._known.add(key)
                    self._order.append(key)
                    if len(self._order) > self._limit:
                        self._known.discard(self._order.popleft())

    def explains(self, entry: entry_pb.Entry) -> bool | None:
        """Whether ``entry`` is a boundary taken before; None when it lies before all this remembers."""
        if not self._order:
            return None
        key = _key(entry)
        if key in self._known:
            return True
        oldest = self._order[0]
        if EntryPosition(key[0], key[1]) < EntryPosition(oldest[0], oldest[1]):
            return None
        return False
