"""The job's chunk windows: registered by the snapshot's thread, moved on by the Consumer, waited on until landed.

The snapshot's thread registers a window before it writes the window's
open signal, reads the chunk, gives the window the chunk, writes the close
signal, then waits until the chunk lands (:meth:`Windows.wait`). The
Consumer thread meets the signals in the stream (:meth:`Windows.signal`),
notes the keys of changes routed while a window of their table is open
(:meth:`Windows.noting`), hands a closed window's chunk to its table's
channel, and says what became of each transaction: aborted (the windows
it closed open again) or landed (their chunks are in the targets).

Signals of windows not registered here (an earlier process's, met again
after a restart) are ignored: that process's chunk is planned again.
"""

from __future__ import annotations

import threading
import time

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db.signals import OPEN
from canalbridge.sync.snapshot.window import ChunkWindow, WindowState, signals_in

Table = tuple[str, str]  # (schema, table)


class Windows:
    """Every chunk window of one job not yet forgotten; one lock guards the map and the states the waiter reads."""

    def __init__(self, signal_table: Table) -> None:
        self.signal_table = signal_table
        self._changed = threading.Condition()
        self._windows: dict[str, ChunkWindow] = {}
        self._open: dict[Table, ChunkWindow] = {}  # the open window of each table (one at a time per table)

    # -- the snapshot's thread ------------------------------------------------------------

    def register(self, window: ChunkWindow) -> None:
        """Take ``window`` in, before its open signal is written."""
        with self._changed:
            if window.id in self._windows:
                raise ValueError(f"window {window.id} is registered already")
            self._windows[window.id] = window

    def wait(self, window: ChunkWindow, timeout_s: float, states: frozenset[WindowState]) -> WindowState:
        """Wait up to ``timeout_s`` until ``window`` is in one of ``states``; the state it is in then."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while window.state not in states:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return window.state

    def forget(self, window: ChunkWindow) -> None:
        """Drop ``window`` (landed, or given up): its signals met again are ignored."""
        with self._changed:
            self._windows.pop(window.id, None)
            if self._open.get(window.table) is window:
                del self._open[window.table]

    # -- the Consumer thread ----------------------------------------------------------------

    def noting(self, table: Table) -> ChunkWindow | None:
        """The window of ``table`` open now, whose keys a change of the table routed now touches."""
        return self._open.get(table)  # (read without the lock: only this thread writes it, one item at a time)

    def signal(self, change: entry_pb.RowChange, label: str) -> list[ChunkWindow]:
        """A change of the signal table routed in transaction ``label``: the windows it closes now, whose chunks
        go into that transaction at this point of the stream."""
        closed = []
        for signal in signals_in(change):
            with self._changed:
                window = self._windows.get(signal.window)
                if window is None:
                    continue
                if signal.kind == OPEN:
                    window.opened()
                    if window.noting:
                        self._open[window.table] = window
                elif window.closed(label):
                    self._open.pop(window.table, None)
                    closed.append(window)
                self._changed.notify_all()
        return closed

    def aborted(self) -> None:
        """The open transaction was dropped: the windows it closed are open again until the replay closes them."""
        with self._changed:
            for window in self._windows.values():
                if window.state is WindowState.CLOSED:
                    window.aborted()
                    self._open[window.table] = window
            self._changed.notify_all()

    def landed(self, label: str, failed: set[str]) -> None:
        """Transaction ``label`` landed on every channel but those ``failed``: the chunks it carried to the
        others are in their targets."""
        with self._changed:
            for window in self._windows.values():
                if window.source not in failed:
                    window.landed(label)
            self._changed.notify_all()

    def held_already(self, window: ChunkWindow) -> None:
        """The channel had committed past ``window``'s close signal (a commit that reported failure but
        landed): the chunk is in the target."""
        with self._changed:
            window.held()
            self._changed.notify_all()
