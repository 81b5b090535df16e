"""What a snapshot and a verify share: key ranges grouped into chunks, a table's columns as Canal describes them,
and the wait for a chunk's window to land."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence

from canalbridge.source_db import KeyRange, KeyValues, TableKey
from canalbridge.sync.errors import SnapshotError
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, WindowState
from canalbridge.sync.snapshot.windows import Windows
from canalbridge.sync.worker import STOP_CHECK_S

ENDED = frozenset({WindowState.LANDED, WindowState.SPOILED})
ROUTED = frozenset(set(WindowState) - {WindowState.REGISTERED})  # the stream passed the window's open signal


def source_columns(described: Sequence[tuple[str, str]], key: TableKey) -> tuple[SourceColumn, ...]:
    """A table's columns (name, declared type) as Canal describes them, its key's marked."""
    keys = {name.lower() for name in key.names}
    # (Canal's sqlType, the column's java.sql.Types code, is read by no writer: 0.)
    return tuple(SourceColumn(name, declared, 0, name.lower() in keys) for name, declared in described)


def groups(ranges: Iterator[KeyRange], size: int) -> Iterator[list[KeyRange]]:
    """``ranges`` in chunks of ``size`` (read together, one connection each)."""
    while group := list(itertools.islice(ranges, size)):
        yield group


def key_text(key: KeyValues | None) -> str | None:
    """A key's values as a person reads them (comma-separated)."""
    return None if key is None else ", ".join(str(value) for value in key)


def span(ranges: Sequence[KeyRange]) -> str:
    """The keys of a chunk's ranges, for an error."""
    return f"after {ranges[0].after!r} through {ranges[-1].through!r}"


def wait_landed(windows: Windows, window: ChunkWindow, timeout_s: float,
                stop: Callable[[], bool]) -> bool | None:
    """Until ``window`` landed (True) or a DDL spoiled it (False); None once ``stop()`` says so (see
    :func:`wait_for`)."""
    state = wait_for(windows, window, ENDED, timeout_s, stop)
    return None if state is None else state is WindowState.LANDED


def wait_for(windows: Windows, window: ChunkWindow, states: frozenset[WindowState], timeout_s: float,
             stop: Callable[[], bool]) -> WindowState | None:
    """Until ``window`` is in one of ``states`` (the one it is in); None once ``stop()`` says so (asked every
    ``STOP_CHECK_S``); :class:`SnapshotError` past ``timeout_s`` (``land_timeout_seconds``), saying whether the
    stream ever passed the window's open signal."""
    deadline = time.monotonic() + timeout_s
    while not stop():
        left = deadline - time.monotonic()
        state = windows.wait(window, min(STOP_CHECK_S, max(left, 0.0)), states)
        if state in states:
            return state
        if left <= 0:
            why = (f"its open signal has not come through the stream: the job is that far behind the binlog, "
                   f"or {'.'.join(windows.signal_table)} is outside what the source sends (Canal's "
                   f"filter, the Kafka topic)" if state is WindowState.REGISTERED
                   else "the stream passed its open signal, and its transaction has not landed in the target")
            raise SnapshotError(window.source, f"window {window.id} waited {timeout_s:g} s "
                                               f"(land_timeout_seconds): {why}")
    return None
