"""The daemon-facing subcommands: run, validate, status, pause, resume, stop, reset, rebuild; and what the commands that
ask the daemon share (loading the config, posting an action, a job's status from the daemon)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from canalbridge.daemon.config import Config, ConfigError, load_config
from canalbridge.daemon.control import ControlError, ControlUnreachable, request
from canalbridge.daemon.control_access import client_endpoint
from canalbridge.daemon.logs import configure_logging
from canalbridge.daemon.state import StateError, StateStore
from canalbridge.daemon.status import job_json, render_text
from canalbridge.sync.model.record import JobRecord, JobState
from canalbridge.sync.routing.rules import known_channels
from canalbridge.sync.snapshot.preflight import snapshot_problems
from spark_sink import classpath
from spark_sink.errors import SparkSetupError

EXIT_CONFIG = 2


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", type=Path, required=True, help="the TOML configuration file")


def load(args: argparse.Namespace, *, secrets: bool = True) -> Config | None:
    """The config ``--config`` names, its warnings printed; None (the error printed) if it cannot be loaded.
    Without ``secrets`` for a command the daemon carries out: it holds the sources' passwords."""
    try:
        config = load_config(args.config, secrets=secrets)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    for warning in config.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return config


def validate(args: argparse.Namespace) -> int:
    config = load(args)
    if config is None:
        return EXIT_CONFIG
    # A snapshot's source is checked now: a wrong password or a missing signal table would pause the job later.
    problems = [problem for job in config.jobs for problem in snapshot_problems(job)]
    if problems:
        print(f"error: {args.config}: the snapshot's source is not ready:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_CONFIG
    # Every jar the config needs is there, or Spark will fetch it: a missing class would show only at a commit.
    try:
        jars = classpath.resolve(config.spark)
    except SparkSetupError as exc:
        print(f"error: {args.config}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"{args.config}: valid ({len(config.jobs)} job(s), "
          f"{sum(len(j.channels) for j in config.jobs)} channel(s))")
    if jars.packages:
        print(f"Spark fetches at start (spark.jars.packages): {', '.join(jars.packages)}")
    return 0


def run(args: argparse.Namespace) -> int:
    # Catch SIGTERM/SIGINT from the very start: a stop during start-up (Spark
    # takes seconds) still ends in a clean shutdown with exit 0.
    stop_requested = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop_requested.set())
    config = load(args)
    if config is None:
        return EXIT_CONFIG
    configure_logging(args.log_level if args.log_level != "info" else config.daemon.log_level,
                      config.daemon.log_format)
    from canalbridge.daemon.service import Daemon, DaemonError

    try:
        return Daemon(config, stop_requested).run()
    except (DaemonError, StateError, SparkSetupError, ControlError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def status(args: argparse.Namespace) -> int:
    # Reading the status needs no Canal or Kafka password; the control token, when the daemon asks for one, is
    # its variable's or the one it wrote (a daemon that wants another says no, and that is reported). Only an
    # endpoint where nothing listens means the daemon is down: then the state store says what it last recorded.
    config = load(args, secrets=False)
    if config is None:
        return EXIT_CONFIG
    try:
        endpoint = client_endpoint(config.daemon)
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        document = request(endpoint, "GET", "/status")
    except ControlError as exc:
        if not isinstance(exc, ControlUnreachable):
            print(f"error: the daemon is running but {exc}", file=sys.stderr)
            return 1
        try:
            document = offline_status(config)
        except StateError as exc:
            print(f"error: the daemon is not running and {exc}", file=sys.stderr)
            return 1
    if args.job:
        document["jobs"] = [job for job in document["jobs"] if job["name"] == args.job]
        if not document["jobs"]:
            print(f"error: no job named {args.job!r} in {args.config}", file=sys.stderr)
            return 1
    print(json.dumps(document, indent=2, sort_keys=True) if args.json else render_text(document, str(args.config)))
    return 0


def offline_status(config: Config) -> dict[str, Any]:
    """The status document from the state store, for a daemon that is not running."""
    store = StateStore(config.daemon.state_dir, create=False)
    try:
        records = store.load_jobs()
    finally:
        store.close()
    jobs = []
    for settings in config.jobs:
        stored = records.get(settings.name)
        channels = known_channels(settings, stored.channels if stored else ())
        record = replace(stored, channels=channels) if stored else JobRecord(settings.name, JobState.PENDING, channels)
        jobs.append(job_json(record, settings))
    return {"live": False, "pid": None, "jobs": jobs}


def reset(args: argparse.Namespace) -> int:
    """``canalbridge reset JOB [--channel TARGET]...``: confirmed, then done by the daemon (which holds Spark)."""
    config = load(args, secrets=False)
    if config is None:
        return EXIT_CONFIG
    if any(not target.strip() for target in args.channel):
        print("error: --channel needs a target table's name", file=sys.stderr)
        return EXIT_CONFIG
    what = (f"the channels writing {', '.join(args.channel)} of job {args.job}" if args.channel
            else f"every channel of job {args.job}")
    if not args.yes and not confirmed(f"a reset makes {what} forget where they stood",
                                      f"Forget where {what} stood, and the job's last ack? Whatever the source "
                                      f"sends next is applied.", "nothing reset"):
        return 1
    result = post_action(config, args.job, "reset", [("channel", target) for target in args.channel],
                         "a reset is done by the daemon: start it, and pause the job")
    if result is None:
        return 1
    print(f"job {result['name']}: {result['state']}, reset ({what}); `canalbridge resume` applies what the "
          f"source sends from its cursor")
    return 0


def rebuild(args: argparse.Namespace) -> int:
    """``canalbridge rebuild JOB TABLE``: confirmed, then done by the daemon (which holds Spark)."""
    config = load(args, secrets=False)
    if config is None:
        return EXIT_CONFIG
    if not args.yes and not confirmed(f"a rebuild replaces the target of {args.table} with the source's rows",
                                      f"Replace the target of {args.table} (job {args.job}) with a new table, and "
                                      f"snapshot the source into it?", "nothing rebuilt"):
        return 1
    result = post_action(config, args.job, "rebuild", [("table", args.table)],
                         "a rebuild is done by the daemon: start it")
    if result is None:
        return 1
    print(f"job {result['name']}: {result['state']}, rebuilding {result['target']} from {result['tables'][0]}; "
          f"`canalbridge status` shows its snapshot")
    return 0


def confirmed(does: str, question: str, declined: str) -> bool:
    """Whether the person at the terminal says yes to ``question`` (what the command ``does`` is said when
    there is no terminal to ask, ``declined`` when they say no)."""
    if not sys.stdin.isatty():
        print(f"error: {does}; confirm with --yes", file=sys.stderr)
        return False
    if input(f"{question} [y/N] ").strip().lower() in ("y", "yes"):
        return True
    print(declined)
    return False


def act(args: argparse.Namespace) -> int:
    config = load(args, secrets=False)  # the request goes to the daemon, which holds the sources' secrets
    if config is None:
        return EXIT_CONFIG
    result = post_action(config, args.job, args.action)
    if result is None:
        return 1
    print(f"job {result['name']}: {result['state']}")
    return 0


def post_action(config: Config, job: str, action: str, parameters: Sequence[tuple[str, str]] = (),
                unreachable: str = "") -> dict[str, Any] | None:
    """Ask the daemon to do ``action`` to ``job`` (``parameters``: name and value pairs); its answer, or None once the
    error is printed (``unreachable``: what to add when the daemon does not answer)."""
    body: dict[str, list[str]] = {}
    for name, value in parameters:
        body.setdefault(name, []).append(value)
    try:
        answer: dict[str, Any] = request(client_endpoint(config.daemon), "POST",
                                         f"/jobs/{quote(job, safe='')}/{action}", body)
        return answer
    except ControlUnreachable as exc:
        print(f"error: {exc}" + (f"; {unreachable}" if unreachable else ""), file=sys.stderr)
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
    return None


def daemon_job(config: Config, job: str) -> dict[str, Any] | None:
    """``job``'s status from the daemon; None once why not is printed (the daemon does not answer, or has no
    such job)."""
    try:
        document = request(client_endpoint(config.daemon), "GET", "/status")
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    status: dict[str, Any] | None = next((each for each in document["jobs"] if each["name"] == job), None)
    if status is None:
        print(f"error: the daemon has no job {job!r} any more", file=sys.stderr)
    return status


def not_running(status: dict[str, Any]) -> str | None:
    """Why a job's status says it is not RUNNING (its state and reason), None while it runs."""
    if status["state"] == "RUNNING":
        return None
    reason = (status.get("fail_message") or {}).get("text", "")
    return f"job {status['name']} is {status['state']}" + (f": {reason}" if reason else "")
