"""Ways to feed a saved entries file for benchmarks: repeated (a long backlog) and paced (a live source).

``repeated`` replays a file several times with later binlog file names, so
a 1M-row file makes a 10M-row backlog without generating 10M rows.
``paced`` releases entries at a fixed row rate and stamps each with the
wall-clock time it was released, the way MySQL stamps the time a
transaction ran, so that a consumer's lag (execute time to commit) can be
measured against a source that writes at that rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from canalbridge.devkit.entry_file import read_entries
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.schema.rows import rows_count

ROWDATA = entry_pb.EntryType.ROWDATA
# Round N moves binlog file K to K + N * JOURNAL_STRIDE, after every file of round N - 1.
JOURNAL_STRIDE = 1000


def repeated(path: Path, times: int) -> Iterator[entry_pb.Entry]:
    """The file's entries ``times`` times over, each round in later binlog files."""
    for round_number in range(times):
        for entry in read_entries(path):
            if round_number:
                prefix, _, number = entry.header.logfileName.rpartition(".")
                shifted = int(number) + round_number * JOURNAL_STRIDE
                entry.header.logfileName = f"{prefix}.{shifted:0{len(number)}d}"
            yield entry


def rows_in(entry: entry_pb.Entry) -> int:
    """Row changes an entry carries, from its ``rowsCount`` header prop (0 for transaction entries)."""
    if entry.entryType != ROWDATA:
        return 0
    return rows_count(entry.header) or 1


def paced(entries: Iterable[entry_pb.Entry], rows_per_s: float) -> Iterator[entry_pb.Entry]:
    """Release entries at ``rows_per_s`` row changes a second, each stamped with its release time (ms)."""
    started = time.monotonic()
    released = 0
    wait = threading.Event()  # never set: waiting on it is the pacing
    for entry in entries:
        ahead = started + released / rows_per_s - time.monotonic()
        if ahead > 0:
            wait.wait(ahead)
        entry.header.executeTime = int(time.time() * 1000)
        released += rows_in(entry)
        yield entry
