"""Where the source's transactions open and end in the entries routed: the clean cut points."""

from __future__ import annotations

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.consumer.policy import PendingWork
from canalbridge.sync.consumer.source_txns import SourceTransactions
from canalbridge.sync.consumer.stream_order import StreamOrder
from canalbridge.sync.errors import SourceSwitchedError
from canalbridge.sync.model.position import EntryPosition

BEGIN = int(entry_pb.EntryType.TRANSACTIONBEGIN)
END = int(entry_pb.EntryType.TRANSACTIONEND)
GTIDLOG = int(entry_pb.EntryType.GTIDLOG)
HEARTBEAT = int(entry_pb.EntryType.HEARTBEAT)


def statement(event_type: entry_pb.EventType.ValueType, *, ddl: bool) -> entry_pb.Entry:
    change = entry_pb.RowChange(eventType=event_type, isDdl=ddl, sql="...")
    return entry_pb.Entry(entryType=entry_pb.EntryType.ROWDATA, header=entry_pb.Header(eventType=event_type),
                          storeValue=change.SerializeToString())


ANNOTATED_SQL = statement(entry_pb.EventType.QUERY, ddl=False)
ALTER = statement(entry_pb.EventType.ALTER, ddl=True)


def at(offset: int) -> EntryPosition:
    return EntryPosition("mysql-bin.000001", offset, 0)


def test_a_begin_opens_a_source_transaction_and_its_end_closes_it_at_a_cut_point():
    txns, work = SourceTransactions(StreamOrder("job"), marks=True), PendingWork(0.0)
    assert txns.marker(work, BEGIN, at(100)) is False
    assert work.in_source_txn
    assert txns.rows(work) is False, "a row inside a transaction is no place to cut"
    assert txns.marker(work, END, at(300)) is True
    assert not work.in_source_txn


def test_a_mariadb_transaction_without_a_begin_is_opened_by_its_first_row_or_its_annotated_sql():
    txns = SourceTransactions(StreamOrder("job"), marks=True)
    by_row, by_sql = PendingWork(0.0), PendingWork(0.0)
    assert txns.rows(by_row) is False and by_row.in_source_txn
    assert txns.statement(by_sql, ANNOTATED_SQL, synced=True) is False and by_sql.in_source_txn
    assert by_sql.cut_due is None, "annotated SQL is not a DDL"


def test_without_transaction_ends_every_row_change_is_a_cut_point():
    txns, work = SourceTransactions(StreamOrder("job"), marks=False), PendingWork(0.0)
    assert txns.rows(work) is True
    assert txns.statement(work, ANNOTATED_SQL, synced=True) is False
    assert not work.in_source_txn, "nothing would ever close it"


def test_a_ddl_standing_alone_is_a_cut_point_and_on_a_synced_table_makes_a_cut_due():
    txns = SourceTransactions(StreamOrder("job"), marks=True)
    synced, other = PendingWork(0.0), PendingWork(0.0)
    assert txns.statement(synced, ALTER, synced=True) is True
    assert synced.cut_due == "ddl"
    assert txns.statement(other, ALTER, synced=False) is True
    assert other.cut_due is None, "a table no channel syncs does not hurry a commit"


def test_a_statement_inside_a_transaction_is_no_cut_point():
    txns, work = SourceTransactions(StreamOrder("job"), marks=True), PendingWork(0.0)
    txns.marker(work, BEGIN, at(100))
    assert txns.statement(work, ALTER, synced=True) is False
    assert work.cut_due is None


@pytest.mark.parametrize("entry_type", [GTIDLOG, HEARTBEAT])
def test_gtid_and_heartbeat_entries_neither_open_nor_close_a_transaction(entry_type):
    txns, work = SourceTransactions(StreamOrder("job"), marks=True), PendingWork(0.0)
    assert txns.marker(work, entry_type, at(100)) is False
    assert not work.in_source_txn
    txns.rows(work)
    assert txns.marker(work, entry_type, at(200)) is False
    assert work.in_source_txn


def test_the_stream_order_learns_the_transaction_ends_that_closed_rows():
    # Three ends that closed rows bound how far Canal's second pass may go back (see StreamOrder).
    order = StreamOrder("job")
    txns, work = SourceTransactions(order, marks=True), PendingWork(0.0)
    for row, end in ((100, 200), (300, 400), (500, 600)):
        assert order.advance(at(row)) is None
        txns.rows(work)
        assert order.advance(at(end)) is None
        txns.marker(work, END, at(end))
    assert order.advance(at(210)) == at(600)
    with pytest.raises(SourceSwitchedError):
        order.advance(at(150))


def test_ends_that_closed_no_rows_do_not_count_for_the_stream_order():
    order = StreamOrder("job")
    txns, work = SourceTransactions(order, marks=True), PendingWork(0.0)
    for end in (200, 400, 600):
        assert order.advance(at(end)) is None
        txns.marker(work, END, at(end))
    assert order.advance(at(150)) == at(600), "no end that closed rows: cannot say it is another binlog"
