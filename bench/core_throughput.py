"""Rows/s through the sync core (Receiver + Consumer + Channels) into in-memory writers.

The workload (a 10-column table, inserts/updates/deletes) is generated once
and cached; a dev server in another process serves it, so the figure is the
core's alone. The clock runs from job start until Canal has acked the last
entry. Prints a final JSON line.

    .venv/bin/python bench/core_throughput.py --rows 200000
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from canalbridge.devserver.catalog import narrow_table
from canalbridge.devserver.entry_file import write_entries
from canalbridge.devserver.workload import Workload, WorkloadSpec
from canalbridge.logs import configure_logging
from canalbridge.sync.job import SyncJob
from canalbridge.sync.position import EntryPosition
from canalbridge.sync.settings import CanalSettings, ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.writer import InMemoryWriter

TABLE = narrow_table(columns=10)


def workload_file(rows: int) -> tuple[Path, Workload, EntryPosition]:
    """Generate (or reuse) the entries file; return it, the workload and the last position."""
    workload = Workload(WorkloadSpec(tables=(TABLE,), row_changes=rows, rows_per_transaction=(1, 50),
                                     null_ratio=0.0, pk_change_ratio=0.05, seed=1))
    entries = list(workload)
    path = Path(tempfile.gettempdir()) / f"canalbridge-bench-core-{rows}.entries"
    write_entries(path, entries)
    return path, workload, EntryPosition.of(entries[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=8192)
    args = parser.parse_args()
    configure_logging("warning")

    path, workload, last = workload_file(args.rows)
    server = subprocess.Popen(
        [sys.executable, "-m", "canalbridge", "--log-level", "warning", "devserver", "--port", "0",
         "--destination", "bench", "--capacity", "65536", "--entries", str(path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        port = int(re.search(r":(\d+) ", server.stdout.readline()).group(1))
        canal = CanalSettings("127.0.0.1", port, "bench", batch_size=args.batch_size, poll_timeout_ms=100)
        settings = JobSettings("bench", canal, (ChannelSettings(TABLE.qualified, "lake.bench.events"),),
                               CommitSettings(store_capacity=65536))
        writer = InMemoryWriter(TABLE.qualified)
        job = SyncJob(settings, lambda channel: writer)
        started = time.perf_counter()
        job.start()
        while job.meta.ack_position is None or job.meta.ack_position < last:
            time.sleep(0.05)  # a benchmark's progress poll, not a test's synchronisation
            if time.perf_counter() - started > 900:
                raise SystemExit(f"not drained: {job.state} {job.fail_message}")
        elapsed = time.perf_counter() - started
        job.pause()
    finally:
        server.terminate()
        server.wait()
    print(json.dumps({
        "benchmark": "core_throughput", "rows": args.rows, "seconds": round(elapsed, 3),
        "rows_per_s": round(args.rows / elapsed), "commits": job.stats.commits,
        "exact": writer.rows == workload.expected[TABLE.qualified].canal_rows(),
    }))


if __name__ == "__main__":
    main()
