"""``canalbridge cuts``: the newest consistent cut of a running job, each target's snapshot at it, and how to read
them all there; exits FAILED while the job's log holds no cut."""

from __future__ import annotations

import argparse
import json
import sys

from canalbridge.daemon.commands import daemon_job, load
from canalbridge.daemon.exit_codes import FAILED, OK
from canalbridge.sync.model.clock import utc_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job")
    parser.add_argument("--json", action="store_true",
                        help="print the cut as `status --json` shows it (null when there is none)")


def run(args: argparse.Namespace) -> int:
    """Ask the daemon for the job's newest consistent cut and print it."""
    config = load(args, secrets=False)
    status = daemon_job(config, args.job)
    if status is None:
        return FAILED
    cut = status.get("cut")
    if args.json:
        print(json.dumps(cut, indent=2, sort_keys=True))
        return OK if cut else FAILED
    if not cut:
        settings = next((job for job in config.jobs if job.name == args.job), None)
        if settings is not None and settings.cuts.atomic:
            print(f"job {args.job}: [job.cuts] atomic: every commit moves all of its targets in one catalog commit, "
                  f"so no cut is logged; read the tables at one commit of the catalog (docs: reading.md#atomic)",
                  file=sys.stderr)
            return FAILED
        how = ("[job.cuts] enabled = false" if settings is not None and not settings.cuts.enabled else
               "a cut is logged once every target holds the same source cut, at most every "
               f"{settings.cuts.interval_seconds if settings is not None else '[job.cuts] interval'} s, and never "
               "while a table's snapshot runs")
        print(f"job {args.job}: no consistent cut logged yet ({how})", file=sys.stderr)
        if status.get("cut_error"):
            print(f"  the last one was not logged: {status['cut_error']}", file=sys.stderr)
        return FAILED
    print(f"job {args.job}: consistent cut {cut['tag']} in {cut['log_table']}, logged {utc_text(cut['published_ms'])}")
    print(f"  source position {cut['position']}, transaction {cut['label']}")
    width = max(len(target) for target in cut["snapshots"])
    for target, snapshot in sorted(cut["snapshots"].items()):
        print(f"  {target:<{width}}  snapshot {snapshot}")
    first = min(cut["snapshots"])
    print(f"read each table at it: SELECT ... FROM {first} VERSION AS OF '{cut['tag']}' (Spark, Trino: FOR VERSION "
          f"AS OF); the newest row of the job in {cut['log_table']} names the newest cut")
    if status.get("cut_error"):
        print(f"  the last cut taken since was not logged: {status['cut_error']}")
    return OK
