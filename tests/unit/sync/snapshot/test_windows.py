"""A job's windows between the snapshot's thread and the Consumer: signals move them, landing ends them."""

from __future__ import annotations

import threading

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import SnapshotError
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, SnapshotChunk, WindowState
from canalbridge.sync.snapshot.progress import TableProgress
from canalbridge.sync.snapshot.windows import Windows
from tests.unit.sync.snapshot.signal_rows import signal

T = TableId("db", "t")
LANDED = frozenset({WindowState.LANDED})
CHUNK = SnapshotChunk((SourceColumn("id", "int(11)", 4, True),), [("1",)], 1, TableProgress("s1", "db.t", (1,), (1,)))


def insert(key: str) -> entry_pb.RowChange:
    return entry_pb.RowChange(eventType=entry_pb.EventType.INSERT,
                              rowDatas=[entry_pb.RowData(afterColumns=[entry_pb.Column(name="id", value=key)])])


def registered() -> tuple[Windows, ChunkWindow]:
    windows = Windows(TableId("db", "canalbridge_signal"))
    window = ChunkWindow("w1", T, ["id"])
    windows.register(window)
    windows.ready(window, CHUNK)
    return windows, window


def test_the_signal_table_concerns_the_windows_and_a_table_without_an_open_window_does_not():
    windows, _ = registered()
    assert windows.concerns(TableId("db", "canalbridge_signal"))
    assert not windows.concerns(T)


def test_a_close_signal_of_a_window_not_given_its_chunk_is_a_bug_named_as_such():
    windows = Windows(TableId("db", "canalbridge_signal"))
    window = ChunkWindow("w1", T, ["id"])
    windows.register(window)
    windows.signal(signal("w1", "open"), "txn-1")
    with pytest.raises(SnapshotError, match="w1: its close signal was written before its chunk was read"):
        windows.signal(signal("w1", "close"), "txn-1")


def test_the_open_signal_starts_noting_the_tables_changes_and_the_close_signal_hands_the_window_over():
    windows, window = registered()
    assert not windows.concerns(T)
    assert windows.signal(signal("w1", "open"), "txn-1") == []
    assert windows.concerns(T)
    windows.note(T, insert("5"))
    windows.note(TableId("db", "other"), insert("6"))  # another table's
    assert windows.signal(signal("w1", "close"), "txn-1") == [window]
    assert not windows.concerns(T)
    assert window.keys == {("5",)}


def test_signals_of_windows_this_process_did_not_register_are_ignored():
    windows, window = registered()
    assert windows.signal(signal("old", "open"), "txn-1") == []
    assert not windows.concerns(T)
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
    assert windows.concerns(T), "the replay's changes before the close signal are noted again"
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
    assert not windows.concerns(T)
    assert windows.signal(signal("w1", "close"), "txn-1") == []


def test_a_window_whose_close_signal_may_be_out_is_withdrawn_only_if_the_stream_has_not_met_it():
    # (A close signal's write that failed: the server may have taken it.) Not met yet: withdrawn, and the
    # signal met later hands nothing over. Met: the chunk is in a transaction, and the window stays.
    windows, window = registered()
    windows.signal(signal("w1", "open"), "txn-1")
    assert windows.withdraw(window)
    assert windows.signal(signal("w1", "close"), "txn-1") == []
    windows, window = registered()
    windows.signal(signal("w1", "open"), "txn-1")
    assert windows.signal(signal("w1", "close"), "txn-1") == [window]
    assert not windows.withdraw(window) and window.state is WindowState.CLOSED


def test_a_ddl_on_the_table_spoils_its_open_window_and_its_close_signal_then_hands_nothing_over():
    windows, window = registered()
    windows.spoil(T)  # before the open signal: the chunk is read after the DDL
    assert window.state is WindowState.REGISTERED
    windows.signal(signal("w1", "open"), "txn-1")
    windows.spoil(TableId("db", "other"))
    assert window.state is WindowState.OPEN
    windows.spoil(T)
    assert window.state is WindowState.SPOILED and not windows.concerns(T)
    assert windows.wait(window, 0.0, frozenset({WindowState.LANDED, WindowState.SPOILED})) is WindowState.SPOILED
    assert windows.signal(signal("w1", "close"), "txn-1") == []
    windows.aborted()
    assert window.state is WindowState.SPOILED, "a replay does not reopen it"


def test_tables_and_channels_match_without_case_as_mysqls_names_may():
    windows = Windows(TableId("DB", "CanalBridge_Signal"))
    window = ChunkWindow("w1", TableId("db", "t"), ["id"])  # as the server spells it
    windows.register(window)
    windows.ready(window, CHUNK)
    assert windows.is_signal(TableId("db", "canalbridge_signal"))
    windows.signal(signal("w1", "open"), "txn-1")
    windows.note(TableId("DB", "T"), insert("5"))  # a header spelled otherwise
    assert windows.signal(signal("w1", "close"), "txn-1") == [window] and window.keys == {("5",)}
    windows.landed("txn-1", {"DB.T"})  # a channel named otherwise failed: the chunk did not land
    assert window.state is WindowState.CLOSED


def test_a_chunk_given_to_a_merged_targets_channel_lands_only_if_that_channel_did():
    windows = Windows(TableId("db", "canalbridge_signal"))
    window = ChunkWindow("w1", TableId("shop_1", "orders"), ["id"])
    windows.register(window)
    windows.ready(window, CHUNK)
    windows.signal(signal("w1", "open"), "txn-1")
    assert windows.signal(signal("w1", "close"), "txn-1") == [window]
    window.channel = "shop_*.orders"  # (as the Consumer records it: the rule names the shards' channel)
    windows.landed("txn-1", {"shop_*.orders"})
    assert window.state is WindowState.CLOSED, "its channel failed: the chunk is not in the target"
    windows.landed("txn-1", {"shop_1.orders"})  # (no channel of that name: the table's is the rule's)
    assert window.state is WindowState.LANDED


def test_an_abort_while_the_next_chunk_is_read_replays_both_windows_each_noting_its_own_keys():
    # w1 is closed and commits while w2 (the next chunk of the table) is open and read; the transaction that
    # carries w1 is aborted, and the replay routes again from before w1's close signal.
    windows, first = registered()
    second = ChunkWindow("w2", T, ["id"])
    windows.register(second)
    windows.signal(signal("w1", "open"), "txn-1")
    windows.note(T, insert("1"))
    windows.signal(signal("w1", "close"), "txn-1")
    windows.signal(signal("w2", "open"), "txn-1")
    windows.note(T, insert("2"))
    windows.aborted()
    assert (first.state, second.state) == (WindowState.OPEN, WindowState.OPEN)
    windows.note(T, insert("1"))  # the replay: w1's part again, then its close, w2's open, w2's part
    assert [window.id for window in windows.signal(signal("w1", "close"), "txn-2")] == ["w1"]
    windows.signal(signal("w2", "open"), "txn-2")
    windows.note(T, insert("2"))
    windows.ready(second, CHUNK)
    windows.landed("txn-2", set())
    assert first.state is WindowState.LANDED
    windows.note(T, insert("3"))
    assert [window.id for window in windows.signal(signal("w2", "close"), "txn-3")] == ["w2"]
    assert (first.keys, second.keys) == ({("1",)}, {("2",), ("3",)})


def test_a_verify_window_hands_nothing_over_at_its_close_and_notes_keys_until_it_is_forgotten():
    windows = Windows(TableId("db", "canalbridge_signal"))
    window = ChunkWindow("v1", T, ["id"], applies=False)
    windows.register(window)  # (no chunk: nothing goes into the target)
    windows.signal(signal("v1", "open"), "txn-1")
    windows.note(T, insert("1"))
    assert windows.signal(signal("v1", "close"), "txn-1") == [] and window.state is WindowState.CLOSED
    windows.note(T, insert("2"))
    windows.landed("txn-1", set())
    assert window.state is WindowState.LANDED
    windows.note(T, insert("3"))  # committed after the close: the target compared may hold it
    assert windows.keys(window) == {("1",), ("2",), ("3",)}
    windows.forget(window)
    windows.note(T, insert("4"))
    assert windows.keys(window) == {("1",), ("2",), ("3",)} and not windows.concerns(T)


def test_a_ddl_spoils_a_verify_window_even_after_it_landed():
    windows = Windows(TableId("db", "canalbridge_signal"))
    window = ChunkWindow("v1", T, ["id"], applies=False)
    windows.register(window)
    windows.signal(signal("v1", "open"), "txn-1")
    windows.signal(signal("v1", "close"), "txn-1")
    windows.landed("txn-1", set())
    windows.spoil(T)  # its columns changed while the target was compared: compare again
    assert window.state is WindowState.SPOILED and not windows.concerns(T)


@pytest.mark.parametrize("held", [True, False], ids=["rows-held", "rows-lost"])
def test_an_abort_reopens_a_closed_window_marking_it_lost_if_its_chunks_rows_went_with_spark(held):
    windows = Windows(TableId("db", "canalbridge_signal"))
    window = ChunkWindow("w1", T, ["id"])
    windows.register(window)
    windows.ready(window, SnapshotChunk(CHUNK.columns, CHUNK.rows, 1, CHUNK.progress, held=lambda: held))
    windows.signal(signal("w1", "open"), "txn-1")
    assert windows.signal(signal("w1", "close"), "txn-1") == [window]
    windows.aborted()
    assert window.state is WindowState.OPEN and windows.concerns(T) and window.lost is not held
