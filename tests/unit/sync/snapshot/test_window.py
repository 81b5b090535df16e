"""A chunk's window: the keys the stream changed between its watermarks, kept until its chunk lands."""

from __future__ import annotations

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db.chunks import KeyRange
from canalbridge.source_db.signals import Signal
from canalbridge.sync.errors import KeyColumnMissing
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, WindowState, changed_keys


def image(**values: str | None) -> list[entry_pb.Column]:
    return [entry_pb.Column(name=name, value=value or "", isNull=value is None) for name, value in values.items()]


def change(event: entry_pb.EventType.ValueType, *rows: tuple[dict, dict]) -> entry_pb.RowChange:
    return entry_pb.RowChange(eventType=event, rowDatas=[
        entry_pb.RowData(beforeColumns=image(**before), afterColumns=image(**after)) for before, after in rows])


INSERT, UPDATE, DELETE = entry_pb.EventType.INSERT, entry_pb.EventType.UPDATE, entry_pb.EventType.DELETE


def test_an_insert_a_delete_and_an_update_touch_the_keys_of_their_images():
    assert list(changed_keys(change(INSERT, ({}, {"id": "1", "v": "a"})), ["id"])) == [("1",)]
    assert list(changed_keys(change(DELETE, ({"id": "2", "v": "a"}, {})), ["id"])) == [("2",)]
    update = change(UPDATE, ({"id": "3", "v": "a"}, {"id": "3", "v": "b"}))
    assert set(changed_keys(update, ["id"])) == {("3",)}


def test_an_update_that_changes_the_key_touches_the_old_key_and_the_new():
    moved = change(UPDATE, ({"a": "1", "b": "x"}, {"a": "1", "b": "y"}))
    assert list(changed_keys(moved, ["A", "b"])) == [("1", "x"), ("1", "y")], "names compare without case"


def test_a_null_in_a_key_column_stays_distinct_from_the_text_null():
    assert list(changed_keys(change(INSERT, ({}, {"k": None})), ["k"])) == [(None,)]
    assert list(changed_keys(change(INSERT, ({}, {"k": "NULL"})), ["k"])) == [("NULL",)]


def test_a_row_image_without_a_key_column_is_an_error_not_a_missed_key():
    with pytest.raises(KeyColumnMissing, match="'id'"):
        list(changed_keys(change(INSERT, ({}, {"v": "a"})), ["id"]))


def test_keys_are_noted_only_while_the_window_is_open():
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    window.note(change(INSERT, ({}, {"id": "1"})))  # before the open signal
    window.opened()
    window.note(change(INSERT, ({}, {"id": "2"})))
    assert window.closed("txn-1")
    window.note(change(INSERT, ({}, {"id": "3"})))  # after the close signal
    assert window.keys == {("2",)}


def test_an_aborted_transaction_reopens_the_window_and_its_replay_closes_it_again_keeping_the_keys():
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    window.opened()
    window.note(change(DELETE, ({"id": "7"}, {})))
    assert window.closed("txn-1")
    window.aborted()
    assert window.state is WindowState.OPEN and window.label is None
    assert not window.landed("txn-1"), "the aborted transaction did not carry the chunk"
    window.note(change(UPDATE, ({"id": "8"}, {"id": "8"})))
    assert window.closed("txn-2")
    assert window.landed("txn-2")
    assert window.state is WindowState.LANDED
    assert window.keys == {("7",), ("8",)}


def test_a_close_signal_routed_again_after_the_chunk_landed_is_not_a_second_chunk():
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    window.opened()
    assert window.closed("txn-1") and window.landed("txn-1")
    window.opened()  # (a replay from an earlier ack cursor)
    assert not window.closed("txn-5")
    assert window.state is WindowState.LANDED


def test_a_close_signal_of_a_window_never_opened_is_not_taken():
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    assert not window.closed("txn-1")
    assert window.state is WindowState.REGISTERED


def test_an_open_signal_met_again_while_the_chunk_waits_for_its_transaction_changes_nothing():
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    window.opened()
    assert window.closed("txn-1")
    window.opened()  # (routed again without an abort in between)
    assert window.state is WindowState.CLOSED and window.label == "txn-1"
    assert not window.closed("txn-1"), "a second close would put the chunk in twice"
    assert window.landed("txn-1")


def test_a_missing_key_column_is_named():
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])
    window.opened()
    with pytest.raises(KeyColumnMissing, match=r"without the key column 'id'"):
        window.note(change(INSERT, ({}, {"v": "a"})))


@pytest.mark.parametrize(("values", "expected"), [
    ({"id": "w:1:open", "kind": "open", "data": '{"table": "db.t"}'}, ("w:1", "open", {"table": "db.t"})),
    ({"id": "w1:close", "kind": "close", "data": "{}"}, ("w1", "close", {})),
    ({"id": "w1:close", "kind": "open", "data": "{}"}, None),  # the id and the kind disagree
    ({"id": "w1:done", "kind": "done", "data": "{}"}, None),
    ({"id": "w1:open", "kind": "open", "data": "{not json"}, None),
    ({"id": None, "kind": "open", "data": "{}"}, None),
])
def test_a_signal_row_holds_a_window_and_a_kind_or_nothing(values, expected):
    signal = Signal.from_row(values)
    assert (None if signal is None else (signal.window, signal.kind, dict(signal.data))) == expected


def test_a_window_over_integer_keys_notes_only_the_keys_in_its_chunks_range():
    # (A stream that lags keeps a window open long: the keys of the rest of the table must not pile up in it.)
    window = ChunkWindow("w1", TableId("db", "t"), ["a", "b"], span=KeyRange((1, 10), (2, 5)))
    window.opened()
    for a, b in [("1", "10"), ("1", "11"), ("2", "5"), ("2", "6"), ("0", "99"), ("3", "0")]:
        window.note(change(INSERT, ({}, {"a": a, "b": b})))
    window.note(change(UPDATE, ({"a": "1", "b": "50"}, {"a": "7", "b": "1"})))  # out of the range: only the old
    assert window.keys == {("1", "11"), ("2", "5"), ("1", "50")}


@pytest.mark.parametrize("span", [KeyRange(("a",), ("m",)), KeyRange(None, None), None],
                         ids=["text-keys", "unbounded", "a-mark"])
def test_a_window_whose_range_python_cannot_order_as_mysql_does_notes_every_key(span):
    window = ChunkWindow("w1", TableId("db", "t"), ["k"], span=span)
    window.opened()
    for key in ("B", "z", "0"):
        window.note(change(INSERT, ({}, {"k": key})))
    assert window.keys == {("B",), ("z",), ("0",)}
