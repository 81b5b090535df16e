"""``canalbridge snapshot``: ask the daemon for a new snapshot of a job's tables while it streams (a re-sync, or
with ``--where`` a back-fill of some rows), then show each table's progress until the snapshot ends;
``--cancel`` cancels the one that runs."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

from canalbridge.daemon.commands import daemon_job, load, not_running, post_action
from canalbridge.daemon.config import Config
from canalbridge.daemon.exit_codes import FAILED, INTERRUPTED, OK, UNTOLD, USAGE
from canalbridge.daemon.status import snapshot_line

POLL_S = 1.0  # how often the progress is asked for
ENDED = ("finished", "cancelled", "gone", "parked")  # (gone: dropped meanwhile; parked: it cannot go on)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job")
    parser.add_argument("tables", nargs="*", metavar="TABLE",
                        help="schema.table of a channel of the job or of a table its pattern takes (several: one "
                             "after the other); default: every table of a channel named for one (tables a "
                             "pattern takes are left out)")
    parser.add_argument("--where", metavar="CONDITION",
                        help="only the rows this SQL condition takes (a back-fill); it runs on the source")
    parser.add_argument("--cancel", action="store_true",
                        help="cancel the snapshot that runs (none running: the parked tables' snapshots): what "
                             "landed stays, and no restart takes it up again")
    parser.add_argument("--no-wait", action="store_true", help="start it and return, without showing its progress")
    parser.add_argument("--json", action="store_true",
                        help="print no progress, and one JSON document at the end (with --no-wait or --cancel: "
                             "the daemon's answer)")


def run(args: argparse.Namespace) -> int:
    """Start (or cancel) the snapshot through the daemon's control endpoint, then follow it."""
    config = load(args, secrets=False)  # the daemon holds the source's password
    if args.cancel and (args.tables or args.where is not None):
        print("error: --cancel cancels the snapshot that runs, whatever its tables: name none", file=sys.stderr)
        return USAGE
    parameters = [("table", table) for table in args.tables]
    if args.where is not None:
        parameters.append(("where", args.where))
    result = post_action(config, args.job, "cancel-snapshot" if args.cancel else "snapshot", parameters,
                         "a snapshot is run by the daemon: start it")
    tables = result["tables"]
    if args.json and (args.cancel or args.no_wait):
        print(json.dumps(result, indent=2, sort_keys=True))
        return OK
    if args.cancel:
        print(f"job {args.job}: the snapshot of {', '.join(tables)} is cancelled; what landed stays, and each table "
              f"not finished lands a mark that says so")
        return OK
    if not args.json:
        print(f"job {args.job}: snapshot of {', '.join(tables)}" + (f" where {args.where}" if args.where else "")
              + " started")
    if args.no_wait:
        return OK
    try:
        # (Each table's progress shows on its channel: a merged target's, named by its pattern, shows its
        # shards'. A daemon older than that answer names channels as tables.)
        return _follow(config, args.job, list(dict.fromkeys(result.get("snapshot_channels", tables))),
                       quiet=args.json)
    except KeyboardInterrupt:
        print("stopped following; the snapshot goes on (`canalbridge status` shows it)", file=sys.stderr)
        return INTERRUPTED


def _follow(config: Config, job: str, tables: list[str], *, quiet: bool) -> int:
    """Print the line of each channel of ``tables`` when it changes (``quiet``: only a JSON document at the end),
    until every one ended (OK, or FAILED if one was cancelled or parked) or the job stopped running (UNTOLD)."""
    shown: dict[str, str] = {}
    tick = threading.Event()  # (never set: the wait between two looks)
    while True:
        status = daemon_job(config, job)
        if status is None:
            return UNTOLD
        if status["state"] == "FINISHED":
            return _ended(job, "done", _phases(status, tables), "FINISHED (its snapshot is done)", quiet)
        stopped = not_running(status)
        if stopped is not None:
            print(f"error: {stopped}", file=sys.stderr)
            return UNTOLD
        phases = _phases(status, tables)
        for table, snapshot in phases.items():
            line = snapshot_line(snapshot)
            if shown.get(table) != line and not quiet:
                print(f"  {table}: {line}", flush=True)
            shown[table] = line
        if len(phases) == len(tables) and all(snapshot["phase"] in ENDED for snapshot in phases.values()):
            ended = {phase: [table for table, snapshot in phases.items() if snapshot["phase"] == phase]
                     for phase in ("cancelled", "parked")}
            said = "; ".join(f"{phase} ({', '.join(tables)})" for phase, tables in ended.items() if tables)
            result = "parked" if ended["parked"] else "cancelled" if ended["cancelled"] else "done"
            return _ended(job, result, phases, f"snapshot {said or 'done'}", quiet)
        tick.wait(POLL_S)


def _ended(job: str, result: str, phases: dict[str, dict[str, Any]], said: str, quiet: bool) -> int:
    """Say how the snapshot ended (``quiet``: as the JSON document) and return its exit status."""
    if quiet:
        print(json.dumps({"job": job, "result": result, "snapshots": phases}, indent=2, sort_keys=True))
    else:
        print(f"job {job}: {said}")
    return OK if result == "done" else FAILED


def _phases(status: dict[str, Any], tables: list[str]) -> dict[str, dict[str, Any]]:
    """The snapshot of each channel of ``tables`` (by source) as the job shows it (those shown yet)."""
    wanted = {table.lower() for table in tables}
    return {channel["source"]: channel["snapshot"] for channel in status["channels"]
            if channel["source"].lower() in wanted and channel.get("snapshot")}
