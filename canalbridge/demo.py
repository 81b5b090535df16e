"""``canalbridge demo``: a generated workload through the dev server, drained and verified.

Until the daemon lands, the demo drains the dev server with the Canal
connector (get, ack) and applies the rows to in-memory tables; then it
compares every table with the generator's expected table and prints a
verdict per table. Exit 0 only when all match.
"""

from __future__ import annotations

import argparse
import time

from canalbridge.canal import CanalConnector
from canalbridge.devserver import DestinationConfig, DevServer
from canalbridge.devserver.catalog import standard_tables
from canalbridge.devserver.replay import TextTables, apply_entries
from canalbridge.devserver.workload import Workload, WorkloadSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=20000, help="row changes to generate (default 20000)")
    parser.add_argument("--tables", type=int, default=3, help="source tables (default 3)")
    parser.add_argument("--batch-size", type=int, default=1024, help="entries per get (default 1024)")
    parser.add_argument("--seed", type=int, default=42)


def run(args: argparse.Namespace) -> int:
    workload = Workload(WorkloadSpec(tables=standard_tables(args.tables), row_changes=args.rows, seed=args.seed))
    tables: TextTables = {}
    started = time.monotonic()
    with DevServer([DestinationConfig("demo", "canal", "canal", capacity=16384)]) as server:
        server.feed("demo", workload)
        with CanalConnector("127.0.0.1", server.port, "demo", username="canal", password="canal") as client:
            client.subscribe(r"shop\..*")
            client.rollback()
            rows = 0
            while True:
                batch = client.get_without_ack(args.batch_size, timeout_ms=200)
                if batch.is_empty:
                    if server.is_drained("demo"):
                        break
                    continue
                rows += apply_entries(tables, batch.entries)
                client.ack(batch.batch_id)
    elapsed = time.monotonic() - started
    print(f"drained {rows} row changes in {elapsed:.1f} s through the Canal protocol")
    failures = 0
    for name, expected in sorted(workload.expected.items()):
        actual = tables.get(name, {})
        ok = actual == expected.canal_rows()
        failures += not ok
        print(f"  {name:<24} {len(actual):>7} rows  {'OK' if ok else 'MISMATCH'}")
    print("demo: all tables match" if not failures else f"demo: {failures} table(s) differ")
    return 0 if not failures else 1
