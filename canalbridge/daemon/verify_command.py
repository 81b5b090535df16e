"""``canalbridge verify``: ask the daemon to compare a running job's targets with their source, chunk by chunk,
then show each table's check until all ended; exits OK when every target equals its source, DIFFERS when a chunk
differs (each printed with the ``canalbridge snapshot --where`` that repairs it), UNTOLD when it could not tell."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

from canalbridge.daemon.commands import daemon_job, load, not_running, post_action
from canalbridge.daemon.config import Config
from canalbridge.daemon.exit_codes import DIFFERS, INTERRUPTED, OK, UNTOLD, USAGE
from canalbridge.daemon.status import verify_lines
from canalbridge.sync.snapshot import verify

POLL_S = 1.0  # how often the checks are asked for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job")
    parser.add_argument("tables", nargs="*", metavar="TABLE",
                        help="schema.table of an upsert channel of the job (several: one after the other); "
                             "default: every upsert channel named for one table")
    parser.add_argument("--no-wait", action="store_true",
                        help="start it and return; `canalbridge status` shows the checks")
    parser.add_argument("--cancel", action="store_true",
                        help="cancel the verify that runs: the tables not done end cancelled (nothing was written)")
    parser.add_argument("--json", action="store_true",
                        help="print no progress, and one JSON document at the end (with --no-wait or --cancel: "
                             "the daemon's answer)")


def run(args: argparse.Namespace) -> int:
    """Start (or cancel) the verify through the daemon's control endpoint, then follow it."""
    config = load(args, secrets=False)  # the daemon holds the source's password
    if args.cancel and args.tables:
        print("error: --cancel cancels the verify that runs, whatever its tables: name none", file=sys.stderr)
        return USAGE
    result = post_action(config, args.job, "cancel-verify" if args.cancel else "verify",
                         [("table", table) for table in args.tables], "a verify is run by the daemon: start it")
    tables = result["tables"]
    if args.json and (args.cancel or args.no_wait):
        print(json.dumps(result, indent=2, sort_keys=True))
        return OK
    if args.cancel:
        print(f"job {args.job}: the verify of {', '.join(tables)} is cancelled; it ends once the read in flight "
              f"returns (`canalbridge status` shows it)")
        return OK
    if not args.json:
        print(f"job {args.job}: verify of {', '.join(tables)} started")
    if args.no_wait:
        return OK
    try:
        return _follow(config, str(args.config), args.job, tables, result["verify_id"], quiet=args.json)
    except KeyboardInterrupt:
        print("stopped following; the verify goes on (`canalbridge status` shows it)", file=sys.stderr)
        return INTERRUPTED


def _follow(config: Config, path: str, job: str, tables: list[str], verify_id: str, *, quiet: bool) -> int:
    """Print each table's check when it changes (``quiet``: only a JSON document at the end), until every one
    ended."""
    shown: dict[str, list[str]] = {}
    tick = threading.Event()  # (never set: the wait between two looks)
    while True:
        status = daemon_job(config, job)
        if status is None:
            return UNTOLD
        stopped = not_running(status)
        if stopped is not None:
            print(f"error: {stopped}; the verify stopped with it", file=sys.stderr)
            return UNTOLD
        checks = _checks(status, tables)
        if len(checks) < len(tables) or any(check["verify_id"] != verify_id for check in checks.values()):
            print(f"error: job {job} holds this verify no more: it was restarted, or another verify began",
                  file=sys.stderr)
            return UNTOLD
        for table, check in checks.items():
            lines = verify_lines(job, table, check, path)
            if shown.get(table) != lines and not quiet:
                print(f"  {table}: " + "\n    ".join(lines), flush=True)
            shown[table] = lines
        if all(check["phase"] in verify.ENDED for check in checks.values()):
            return _ended(job, checks, quiet)
        tick.wait(POLL_S)


def _ended(job: str, checks: dict[str, dict[str, Any]], quiet: bool) -> int:
    """Say how the verify ended (``quiet``: as the JSON document) and return its exit status."""
    differ = [table for table, check in checks.items() if check["phase"] == "differs"]
    unknown = [table for table, check in checks.items() if check["phase"] in verify.UNTOLD]
    result = "untold" if unknown else "differs" if differ else "equal"
    if quiet:
        print(json.dumps({"job": job, "result": result, "checks": checks}, indent=2, sort_keys=True))
    else:
        if unknown:
            print(f"job {job}: verify could not finish {', '.join(unknown)}", file=sys.stderr)
        if differ:
            print(f"job {job}: {', '.join(differ)} differ from the source")
        if not differ and not unknown:
            print(f"job {job}: every target equals its source")
    return UNTOLD if unknown else DIFFERS if differ else OK


def _checks(status: dict[str, Any], tables: list[str]) -> dict[str, dict[str, Any]]:
    """The verify of each of ``tables`` as the job's channels show it (the verify started shows them all)."""
    wanted = {table.lower() for table in tables}
    return {channel["source"]: channel["verify"] for channel in status["channels"]
            if channel["source"].lower() in wanted and channel.get("verify")}
