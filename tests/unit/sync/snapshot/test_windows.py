"""A job's windows between the snapshot's thread and the Consumer: signals move them, landing ends them."""

from __future__ import annotations

import json
import threading

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.snapshot.window import ChunkWindow, WindowState
from canalbridge.sync.snapshot.windows import Windows

T = ("db", "t")
LANDED = frozenset({WindowState.LANDED})


def signal(window: str, kind: str, event: entry_pb.EventType.ValueType = entry_pb.EventType.INSERT
           ) -> entry_pb.RowChange:
    values = {"id": f"{window}:{kind}", "kind": kind, "data": json.dumps({})}
    columns = [entry_pb.Column(name=name, value=value) for name, value in values.items()]
    row = entry_pb.RowData(afterColumns=columns) if event == entry_pb.EventType.INSERT else entry_pb.RowData(
        beforeColumns=columns)
    return entry_pb.RowChange(eventType=event, rowDatas=[row])


def insert(key: str) -> entry_pb.RowChange:
    return entry_pb.RowChange(eventType=entry_pb.EventType.INSERT,
                              rowDatas=[entry_pb.RowData(afterColumns=[entry_pb.Column(name="id", value=key)])])


def registered() -> tuple[Windows, ChunkWindow]:
    windows = Windows(("db", "canalbridge_signal"))
    window = ChunkWindow("w1", T, ["id"])
    windows.register(window)
    return windows, window


def test_the_open_signal_starts_noting_the_tables_changes_and_the_close_signal_hands_the_window_over():
    windows, window = registered()
    assert windows.noting(T) is None
    assert windows.signal(signal("w1", "open"), "txn-1") == []
    assert windows.noting(T) is window
    windows.noting(T).note(insert("5"))
    assert windows.signal(signal("w1", "close"), "txn-1") == [window]
    assert windows.noting(T) is None
    assert window.keys == {("5",)}


def test_signals_of_windows_this_process_did_not_register_are_ignored():
    windows, window = registered()
    assert windows.signal(signal("old", "open"), "txn-1") == []
    assert windows.noting(T) is None
    assert windows.signal(signal("old", "close"), "txn-1") == []
    assert windows.signal(signal("w1", "open", entry_pb.EventType.DELETE), "txn-1") == [], "a deleted signal row"
    assert window.state is WindowState.REGISTERED


def test_the_snapshot_thread_waits_until_the_transaction_that_carries_the_chunk_lands():
    windows, window = registered()
    seen: list[WindowState] = []
    waiter = threading.Thread(target=lambda: seen.append(windows.wait(window, 30.0, LANDED)))
    waiter.start()
    windows.signal(signal("w1", "open"), "txn-1")
    windows.signal(signal("w1", "close"), "txn-1")
    windows.landed("txn-0", set())  # an earlier transaction
    assert window.state is WindowState.CLOSED
    windows.landed("txn-1", set())
    waiter.join(30.0)
    assert seen == [WindowState.LANDED]


def test_a_transaction_whose_chunk_channel_failed_leaves_the_window_to_the_replay():
    windows, window = registered()
    windows.signal(signal("w1", "open"), "txn-1")
    windows.signal(signal("w1", "close"), "txn-1")
    windows.landed("txn-1", {"db.t"})
    assert window.state is WindowState.CLOSED
    windows.aborted()
    assert window.state is WindowState.OPEN
    assert windows.noting(T) is window, "the replay's changes before the close signal are noted again"
    assert windows.signal(signal("w1", "close"), "txn-2") == [window]
    windows.landed("txn-2", {"db.other"})
    assert window.state is WindowState.LANDED


def test_a_chunk_the_target_held_already_ends_the_window():
    windows, window = registered()
    windows.signal(signal("w1", "open"), "txn-1")
    windows.signal(signal("w1", "close"), "txn-1")
    windows.held_already(window)
    assert windows.wait(window, 0.0, LANDED) is WindowState.LANDED


def test_a_wait_that_runs_out_returns_the_state_the_window_is_in():
    windows, window = registered()
    windows.signal(signal("w1", "open"), "txn-1")
    assert windows.wait(window, 0.01, LANDED) is WindowState.OPEN


def test_a_forgotten_window_is_no_longer_noted_and_its_signals_are_ignored():
    windows, window = registered()
    windows.signal(signal("w1", "open"), "txn-1")
    windows.forget(window)
    assert windows.noting(T) is None
    assert windows.signal(signal("w1", "close"), "txn-1") == []
