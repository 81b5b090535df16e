"""The job's chunk windows: registered by the snapshot's thread, moved on by the Consumer, waited on until landed.

The snapshot's thread registers a window before it writes the window's
open signal, reads the chunk, gives the window the chunk (:meth:`Windows.ready`), writes the close
signal, then waits until the chunk lands (:meth:`Windows.wait`). The
Consumer thread meets the signals in the stream (:meth:`Windows.signal`),
notes the keys of changes routed while a window of their table is open
(:meth:`Windows.note`), hands a closed window's chunk to its table's
channel, and says what became of each transaction: aborted (the windows
it closed open again) or landed (their chunks are in the targets).

Signals of windows not registered here (an earlier process's, met again
after a restart) are ignored: that process's chunk is planned again.

A verify window's close signal carries no chunk: the window stays among the
open ones, noting, until its thread forgets it (see :mod:`canalbridge.sync.snapshot.chunk_window`).

A RENAME TABLE or DROP TABLE the Consumer routes spoils the table's open
window (Canal's header names a renamed table's new name, so the old name's
window is spoiled by name). Where the job follows the rename, the table's
new name is kept here: the snapshot reads it under that name from then on
(:meth:`Windows.current`); a table dropped, or renamed away without the job
following, is kept as gone (:meth:`Windows.gone`). A *probe* (a window of
no table's rows, waited on until its open signal is routed) tells the
snapshot's thread when the stream has routed everything written before it.
"""

from __future__ import annotations

import threading
import time

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db.signals import OPEN
from canalbridge.sync.errors import SnapshotError
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.snapshot.chunk_window import CanalKey, ChunkWindow, SnapshotChunk, WindowState, signals_in


class Windows:
    """Every chunk window of one job not yet forgotten; one lock guards the map and the states the waiter reads."""

    def __init__(self, signal_table: TableId) -> None:
        self.signal_table = signal_table
        self._signal_key = signal_table.key
        self._changed = threading.Condition()
        self._windows: dict[str, ChunkWindow] = {}
        # The open window of each table (one at a time per table), by its names in lower case: MySQL's may be
        # case-blind (lower_case_table_names), and a binlog header need not spell them as the config does.
        self._open: dict[tuple[str, str], ChunkWindow] = {}  # by TableId.key
        # Each table a followed RENAME moved (by its old name's TableId.key): its new name, as the stream met it.
        self._moved: dict[tuple[str, str], TableId] = {}
        # The names the stream dropped, or renamed away without the job following (by TableId.key).
        self._gone: set[tuple[str, str]] = set()

    # -- the snapshot's thread ------------------------------------------------------------

    def register(self, window: ChunkWindow) -> None:
        """Take ``window`` in, before its open signal is written."""
        with self._changed:
            if window.id in self._windows:
                raise ValueError(f"window {window.id} is registered already")
            self._windows[window.id] = window

    def ready(self, window: ChunkWindow, chunk: SnapshotChunk) -> None:
        """Give ``window`` its chunk, read after its open signal, before the close signal is written."""
        with self._changed:
            window.chunk = chunk

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

    def withdraw(self, window: ChunkWindow) -> bool:
        """Forget ``window`` unless the stream met its close signal (its chunk is then in a transaction, and
        lands unless a DDL spoils it): whether it was forgotten. For a close signal whose write failed, which
        the server may have taken all the same: forgotten, its signal met later is ignored."""
        with self._changed:  # (re-entrant: forgotten before the Consumer can close it)
            if window.state in (WindowState.CLOSED, WindowState.LANDED):
                return False
            self.forget(window)
            return True

    def forget(self, window: ChunkWindow) -> None:
        """Drop ``window`` (landed, or given up): its signals met again are ignored."""
        with self._changed:
            self._windows.pop(window.id, None)
            if self._open.get(window.table.key) is window:
                del self._open[window.table.key]

    def current(self, table: TableId) -> TableId:
        """The name ``table`` goes by now: the last name followed RENAMEs the stream routed gave it."""
        with self._changed:
            seen = {table.key}
            while (moved := self._moved.get(table.key)) is not None and moved.key not in seen:
                seen.add(moved.key)  # (a RENAME back to an earlier name ends the chain there)
                table = moved
            return table

    def gone(self, table: TableId) -> bool:
        """Whether the stream dropped ``table`` (or renamed it away, the job not following) and no table took
        the name since."""
        with self._changed:
            return table.key in self._gone

    # -- the Consumer thread ----------------------------------------------------------------

    def concerns(self, table: TableId) -> bool:
        """Whether a row change of ``table`` routed now is a signal, or falls in an open window."""
        # (Read without the lock: one dict lookup; the snapshot's thread only removes windows it gave up.)
        key = table.key
        return key in self._open or key == self._signal_key

    def is_signal(self, table: TableId) -> bool:
        """Whether ``table`` is the signal table (its rows go to no channel)."""
        return table.key == self._signal_key

    def note(self, table: TableId, change: entry_pb.RowChange) -> None:
        """A change of ``table`` routed now: its keys count in the table's open window, if any."""
        with self._changed:  # (a verify window's keys are read by its own thread while they are noted)
            window = self._open.get(table.key)
            if window is not None:
                window.note(change)

    def keys(self, window: ChunkWindow) -> frozenset[CanalKey]:
        """The keys ``window`` noted so far."""
        with self._changed:
            return window.keys

    def spoil(self, table: TableId) -> None:
        """A DDL on ``table`` was routed: its open window, if any, is spoiled."""
        with self._changed:
            window = self._open.get(table.key)
            if window is not None and window.spoiled():
                del self._open[table.key]
                self._changed.notify_all()

    def moved(self, old: TableId, new: TableId | None) -> None:
        """A RENAME TABLE or DROP TABLE of ``old`` was routed: its open window, if any, is spoiled; ``new``: the
        name the job follows it under (None: dropped, or a rename the job does not follow: ``old`` names no
        table of the snapshot's from now on)."""
        with self._changed:
            if new is not None:
                self._moved[old.key] = new
                self._moved.pop(new.key, None)  # (a table moved back under a name it had)
                self._gone.discard(new.key)
            else:
                self._gone.add(old.key)
            window = self._open.get(old.key)
            if window is not None and window.spoiled():
                del self._open[old.key]
            self._changed.notify_all()

    def given_up(self, window: ChunkWindow) -> None:
        """``window`` closed, and its chunk goes nowhere: no channel takes its table now (renamed away, a channel
        gone), or its rows were lost. It is spoiled: the snapshot reads the chunk again, in a new window, as the
        table is then."""
        with self._changed:
            if window.state is WindowState.CLOSED:
                window.aborted()  # (closed by the signal just routed: open again, then spoiled)
            if window.spoiled() and self._open.get(window.table.key) is window:
                del self._open[window.table.key]
            self._changed.notify_all()

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
                        self._open[window.table.key] = window
                elif not window.applies:
                    window.closed(label)  # (it goes on noting: no chunk goes into the target here)
                elif window.chunk is None:
                    raise SnapshotError(window.source, f"window {window.id}: its close signal was written before "
                                                       "its chunk was read")
                elif window.closed(label):
                    self._open.pop(window.table.key, None)
                    closed.append(window)
                self._changed.notify_all()
        return closed

    def aborted(self) -> None:
        """The open transaction was dropped: the windows it closed are open again until the replay closes them.
        A window whose chunk lost its rows meanwhile (a Spark JVM that died with them) is marked ``lost``: at
        its close signal the replay gives it up (:meth:`given_up`) rather than add the lost rows again, unless
        the target held the chunk already."""
        with self._changed:
            closed = [window for window in self._windows.values() if window.state is WindowState.CLOSED]
        # (Outside the lock: asking the reader may take a round trip to Spark. Only this thread moves a window's
        # state; the snapshot's thread may forget one meanwhile.)
        lost = {window.id for window in closed if window.chunk is not None and not window.chunk.held()}
        with self._changed:
            for window in closed:
                if self._windows.get(window.id) is not window or window.state is not WindowState.CLOSED:
                    continue  # (forgotten meanwhile: a stop, a land timeout)
                window.aborted()
                window.lost = window.id in lost
                self._open[window.table.key] = window
            self._changed.notify_all()

    def landed(self, label: str, failed: set[str]) -> None:
        """Transaction ``label`` landed on every channel but those ``failed`` (by source): the chunks it carried
        to the others are in their targets."""
        failed = {source.lower() for source in failed}
        with self._changed:
            for window in self._windows.values():
                if (window.channel or window.source).lower() not in failed:
                    window.landed(label)
            self._changed.notify_all()

    def held_already(self, window: ChunkWindow) -> None:
        """The channel had committed past ``window``'s close signal (a commit that reported failure but
        landed): the chunk is in the target."""
        with self._changed:
            window.held()
            self._changed.notify_all()
