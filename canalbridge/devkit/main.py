"""``canalbridge devserver``: run the dev server standalone until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from canalbridge.canal.server_defaults import STORE_BUFFER_SIZE
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.destination import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter
from canalbridge.devkit.feeds import paced, repeated
from canalbridge.devkit.server import DevServer
from canalbridge.devkit.store import BatchMode
from canalbridge.devkit.workload import Workload, WorkloadSpec

PRELOAD_TIMEOUT_S = 3600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=11111, help="port; 0 picks a free one (default 11111)")
    parser.add_argument("--destination", default="example", help="destination name (default example)")
    parser.add_argument("--user", default="", help="username clients must give (default: any)")
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument("--password", default="", help="password (prefer --password-env)")
    secret.add_argument("--password-env", metavar="VAR", help="read the password from this environment variable")
    parser.add_argument("--capacity", type=int, default=STORE_BUFFER_SIZE,
                        help=f"store capacity, a power of 2 (default {STORE_BUFFER_SIZE})")
    parser.add_argument(
        "--batch-mode", choices=[m.value for m in BatchMode], default=BatchMode.ITEMSIZE.value,
        help="how a get's batch size counts: events (ITEMSIZE) or KiB (MEMSIZE)",
    )
    parser.add_argument("--workload", type=int, default=0, metavar="ROWS", help="feed ROWS generated row changes")
    parser.add_argument("--entries", type=Path, metavar="FILE", help="feed the entries saved in FILE (see entry_file)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="feed the entries file N times, each round in later binlog files (default 1)")
    parser.add_argument("--rate", type=float, default=0, metavar="ROWS_PER_S",
                        help="release the entries file at this many row changes a second, stamping each entry's "
                             "execute time when released (default: all at once, times as saved)")
    parser.add_argument("--preload", action="store_true",
                        help="read the whole entries file into the store before printing the listening line, so "
                             "that serving it costs next to nothing (the store must hold it all)")
    parser.add_argument("--tables", type=int, default=3, help="tables in the generated workload (default 3)")
    parser.add_argument("--seed", type=int, default=42, help="workload random seed (default 42)")
    parser.add_argument("--gtid", action="store_true", help="generate GTIDs as MySQL's gtid_mode=ON does")


def run(args: argparse.Namespace) -> int:
    if args.preload and args.rate:
        print("error: --preload serves every entry at once; it cannot go with --rate", file=sys.stderr)
        return 2
    password = args.password
    if args.password_env:
        if args.password_env not in os.environ:
            print(f"error: environment variable {args.password_env} is not set", file=sys.stderr)
            return 2
        password = os.environ[args.password_env]
    config = DestinationConfig(
        args.destination, args.user, password, capacity=args.capacity, batch_mode=BatchMode(args.batch_mode)
    )
    try:
        server = DevServer([config], host=args.host, port=args.port).start()
    except (OSError, ValueError) as exc:
        print(f"error: cannot start the dev server on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    if args.workload:
        spec = WorkloadSpec(tables=standard_tables(args.tables), row_changes=args.workload, seed=args.seed)
        writer = BinlogWriter(gtid_uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562" if args.gtid else None)
        server.feed(args.destination, Workload(spec, writer))
    if args.entries:
        if not args.entries.is_file():
            print(f"error: entries file {args.entries} does not exist", file=sys.stderr)
            server.stop()
            return 2
        entries = repeated(args.entries, args.repeat)
        server.feed(args.destination, paced(entries, args.rate) if args.rate > 0 else entries)
    if args.preload:
        try:
            server.preload(args.destination, timeout_s=PRELOAD_TIMEOUT_S)
        except (ValueError, RuntimeError, TimeoutError) as exc:
            print(f"error: cannot preload the entries: {exc}", file=sys.stderr)
            server.stop()
            return 2
    print(f"canal devserver listening on {server.address} destination {args.destination}", flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0
