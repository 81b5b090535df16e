"""What the benchmarks share: cached workload files, a dev server in its own process, RSS, percentiles."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from canalbridge.devkit.catalog import narrow_table
from canalbridge.devkit.entries import TableDef
from canalbridge.devkit.entry_file import read_entries, write_entries
from canalbridge.devkit.feeds import rows_in
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.sync.changes import ChangeKind, ChangeRow
from canalbridge.sync.position import EntryPosition

CACHE = Path(tempfile.gettempdir())


def bench_tables(count: int) -> tuple[TableDef, ...]:
    """``count`` 10-column tables: bench.events_1 ... bench.events_N."""
    return tuple(narrow_table(f"events_{n}", columns=10) for n in range(1, count + 1))


def workload_file(name: str, tables: Sequence[TableDef], rows: int, *, rows_per_event: int,
                  seed: int = 1) -> tuple[Path, int, EntryPosition]:
    """Generate (or reuse) an entries file; return it, its row changes and its last position.

    The workload is 60% inserts, 30% updates (5% of them change the key),
    10% deletes, no NULLs, transactions of 1-50 rows.
    """
    path = CACHE / f"canalbridge-bench-{name}-{rows}-{rows_per_event}-{seed}.entries"
    if not path.exists():
        spec = WorkloadSpec(tables=tuple(tables), row_changes=rows, rows_per_transaction=(1, 50),
                            rows_per_event=rows_per_event, null_ratio=0.0, pk_change_ratio=0.05, seed=seed)
        partial = path.with_suffix(".partial")
        write_entries(partial, Workload(spec))
        partial.rename(path)
    row_changes, last = 0, None
    for last in read_entries(path):  # one pass: the files run to a GB
        row_changes += rows_in(last)
    assert last is not None, f"{path} is empty"
    return path, row_changes, EntryPosition.of(last)


@contextlib.contextmanager
def dev_server(path: Path, destination: str = "bench", *, capacity: int = 65536, repeat: int = 1,
               rate: float = 0) -> Iterator[int]:
    """A dev server process feeding ``path``; yields its port."""
    command = [sys.executable, "-m", "canalbridge", "--log-level", "warning", "devserver", "--port", "0",
               "--destination", destination, "--capacity", str(capacity), "--entries", str(path),
               "--repeat", str(repeat)]
    if rate:
        command += ["--rate", str(rate)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        match = re.search(r":(\d+) ", line)
        if match is None:
            raise SystemExit(f"the dev server did not start: {line!r}")
        yield int(match.group(1))
    finally:
        server.terminate()
        server.wait()


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(counts: Counter, share: float) -> float:
    """The value below which ``share`` of the counted items fall (``counts``: value -> how many)."""
    total = sum(counts.values())
    if not total:
        return float("nan")
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= share * total:
            return value
    return max(counts)


def make_rows(start_key: int, count: int, offset: int) -> list[ChangeRow]:
    """``count`` inserts of a 10-column bench table, keys from ``start_key``."""
    position = EntryPosition("mysql-bin.000001", offset)
    rows = []
    for n in range(count):
        key = start_key + n
        values = (str(key), str(key % 1000), f"name-{key}", f"{key % 100000}.25", "2024-05-06 07:08:09.123",
                  str(key * 7), str(n), f"v{n}", "1.50", "2025-01-01 00:00:00.000")
        rows.append(ChangeRow(ChangeKind.INSERT, values, position))
    return rows
