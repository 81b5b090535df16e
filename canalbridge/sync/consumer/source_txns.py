"""Where the source's transactions open and end in what the Consumer routes: the clean cut points.

A commit cut between two source (MySQL) transactions leaves no target
showing half of one. Canal's TCP stream marks a transaction with a
TRANSACTIONBEGIN and a TRANSACTIONEND entry, but a MariaDB transaction has
no BEGIN entry: its first row, or the SQL that annotates its rows, opens it.
A Kafka topic without transaction markers (flat messages, or protobuf
records hashed over partitions) marks none: there, every row entry is a
cut point. A statement outside a transaction (a DDL) stands
alone and is a cut point too; one on a synced table makes a cut due at
once, so that what came before it lands under the old schema.
"""

from __future__ import annotations

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.consumer.policy import PendingWork
from canalbridge.sync.consumer.stream_order import StreamOrder
from canalbridge.sync.model.position import Position
from canalbridge.sync.schema.rows import is_ddl

# Plain ints: attribute lookups on protobuf enum wrappers are slow in a per-entry loop.
_BEGIN = int(entry_pb.EntryType.TRANSACTIONBEGIN)
_END = int(entry_pb.EntryType.TRANSACTIONEND)
_QUERY = int(entry_pb.EventType.QUERY)


class SourceTransactions:
    """Follows the open source transaction through the entries routed, in the Consumer's ``PendingWork``,
    and tells the epoch's :class:`StreamOrder` where rows and transaction ends went. Each method says
    whether the entry is a cut point. Used by the Consumer thread only."""

    def __init__(self, order: StreamOrder, *, marks: bool) -> None:
        self._order = order
        self._marks = marks  # the source sends transaction ends (not a Kafka topic without markers)

    def marker(self, work: PendingWork, entry_type: int, position: Position) -> bool:
        """An entry that is not ROWDATA: a BEGIN opens a source transaction, an END closes it (a cut point);
        the others (GTIDLOG, HEARTBEAT) do neither."""
        if entry_type == _BEGIN:
            work.open_source_txn()
        elif entry_type == _END:
            work.close_source_txn()
            self._order.transaction_end(position)
            return True
        return False

    def rows(self, work: PendingWork) -> bool:
        """A row change: it opens a source transaction if none is open (MariaDB's have no BEGIN entry);
        without transaction ends every row change is a cut point."""
        self._order.rows()
        if self._marks:
            work.open_source_txn()
            return False
        return True

    def statement(self, work: PendingWork, entry: entry_pb.Entry, *, synced: bool) -> bool:
        """A statement (a ROWDATA entry that is not a row change) on a table that a channel syncs or not:
        True if it stands alone outside a transaction (a DDL, or another statement Canal parsed): a cut point."""
        if work.in_source_txn:
            return False  # a statement inside a transaction (annotated SQL, SAVEPOINT)
        if entry.header.eventType == _QUERY and not is_ddl(entry.storeValue):
            # The annotated SQL that opens a MariaDB transaction (or a MySQL Rows_query).
            if self._marks:
                work.open_source_txn()
            return False
        if synced:
            work.cut_due = "ddl"  # what came before a table's DDL lands under the old schema
        return True
