"""The daemon-facing subcommands: run, validate, status, pause, resume, stop, reset, rebuild; and what the commands that
ask the daemon share (loading the config, posting an action, a job's status from the daemon).

A command that cannot go on prints why and raises :class:`CommandExit` with its status (``exit_codes``)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from canalbridge.daemon.config import Config, ConfigError, load_config
from canalbridge.daemon.control import ControlError, ControlUnreachable, request
from canalbridge.daemon.control_access import client_endpoint
from canalbridge.daemon.exit_codes import FAILED, OK, UNREACHABLE, USAGE, CommandExit
from canalbridge.daemon.logs import configure_logging
from canalbridge.daemon.state import StateError, StateStore
from canalbridge.daemon.status import job_json, render_text
from canalbridge.sync.model.record import JobRecord, JobState
from canalbridge.sync.routing.rules import known_channels
from canalbridge.sync.snapshot.preflight import snapshot_problems
from spark_sink import classpath
from spark_sink.errors import SparkSetupError


def load(args: argparse.Namespace, *, secrets: bool = True) -> Config:
    """The config the command line names, its warnings printed; exits with USAGE (the error printed) if it cannot be
    loaded. Without ``secrets`` for a command the daemon carries out: it holds the sources' passwords."""
    try:
        config = load_config(args.config, secrets=secrets)
    except ConfigError as exc:
        print(f"error: {exc}{_how_chosen(args)}", file=sys.stderr)
        raise CommandExit(USAGE) from None
    for warning in config.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return config


def _how_chosen(args: argparse.Namespace) -> str:
    """For a config file that is not there: where its name came from, when no ``-c`` gave it."""
    chosen = getattr(args, "config_from", "-c")
    if chosen == "-c" or args.config.exists():
        return ""
    return f"\n  (the file {chosen} names: give another with -c FILE or CANALBRIDGE_CONFIG)"


def validate(args: argparse.Namespace) -> int:
    """Check the config; unless ``--offline``, also the snapshot's source and the jars it needs."""
    result: dict[str, Any] = {"config": str(args.config), "valid": False, "offline": args.offline, "jobs": 0,
                              "channels": 0, "warnings": [], "problems": [], "spark_packages": []}
    status, heading = _validate(args, result)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return status
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if result["problems"]:
        print(f"error: {args.config}: {heading}:{_how_chosen(args)}", file=sys.stderr)
        for problem in result["problems"]:
            print(f"  - {problem}", file=sys.stderr)
        return status
    print(f"{args.config}: valid ({result['jobs']} job(s), {result['channels']} channel(s))"
          + (", checked offline: no source or jar was looked at" if args.offline else ""))
    if result["spark_packages"]:
        print(f"Spark fetches at start (spark.jars.packages): {', '.join(result['spark_packages'])}")
    return status


def _validate(args: argparse.Namespace, result: dict[str, Any]) -> tuple[int, str]:
    """Fill ``result`` (the ``--json`` document); the exit status, and what its problems are, if any."""
    try:
        # Offline, a password variable that is not set is no problem: a CI pipeline has no secrets.
        config = load_config(args.config, secrets=not args.offline)
    except ConfigError as exc:
        result["problems"] = exc.problems
        return USAGE, "invalid configuration"
    result.update(jobs=len(config.jobs), channels=sum(len(job.channels) for job in config.jobs),
                  warnings=list(config.warnings))
    if args.offline:
        result["valid"] = True
        return OK, ""
    # A snapshot's source is checked now: a wrong password or a missing signal table would pause the job later.
    problems = [problem for job in config.jobs for problem in snapshot_problems(job)]
    if problems:
        result["problems"] = problems
        return USAGE, "the snapshot's source is not ready"
    # Every jar the config needs is there, or Spark will fetch it: a missing class would show only at a commit.
    try:
        jars = classpath.resolve(config.spark)
    except SparkSetupError as exc:
        result["problems"] = [str(exc)]
        return USAGE, "Spark is not set up for it"
    result.update(valid=True, spark_packages=list(jars.packages))
    return OK, ""


def run(args: argparse.Namespace) -> int:
    # Catch SIGTERM/SIGINT from the very start: a stop during start-up (Spark
    # takes seconds) still ends in a clean shutdown with exit 0.
    stop_requested = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop_requested.set())
    config = load(args)
    configure_logging(args.log_level or config.daemon.log_level, config.daemon.log_format)
    from canalbridge.daemon.service import Daemon, DaemonError

    try:
        return Daemon(config, stop_requested).run()
    except (DaemonError, StateError, SparkSetupError, ControlError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return FAILED


def status(args: argparse.Namespace) -> int:
    # Reading the status needs no Canal or Kafka password; the control token, when the daemon asks for one, is
    # its variable's or the one it wrote (a daemon that wants another says no, and that is reported). Only an
    # endpoint where nothing listens means the daemon is down: then the state store says what it last recorded.
    config = load(args, secrets=False)
    try:
        endpoint = client_endpoint(config.daemon)
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return FAILED
    try:
        document = request(endpoint, "GET", "/status")
    except ControlError as exc:
        if not isinstance(exc, ControlUnreachable):
            print(f"error: the daemon is running but {exc}", file=sys.stderr)
            return FAILED
        try:
            document = offline_status(config)
        except StateError as exc:
            print(f"error: the daemon is not running and {exc}", file=sys.stderr)
            return FAILED
    if args.job:
        document["jobs"] = [job for job in document["jobs"] if job["name"] == args.job]
        if not document["jobs"]:
            print(f"error: no job named {args.job!r} in {args.config}", file=sys.stderr)
            return FAILED
    print(json.dumps(document, indent=2, sort_keys=True) if args.json else render_text(document, str(args.config)))
    return OK


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
    if any(not target.strip() for target in args.channel):
        print("error: --channel needs a target table's name", file=sys.stderr)
        return USAGE
    what = (f"the channels writing {', '.join(args.channel)} of job {args.job}" if args.channel
            else f"every channel of job {args.job}")
    if not args.yes and not confirmed(f"a reset makes {what} forget where they stood",
                                      f"Forget where {what} stood, and the job's last ack? Whatever the source "
                                      f"sends next is applied.", "nothing reset"):
        return FAILED
    result = post_action(config, args.job, "reset", [("channel", target) for target in args.channel],
                         "a reset is done by the daemon: start it, and pause the job")
    print(f"job {result['name']}: {result['state']}, reset ({what}); `canalbridge resume` applies what the "
          f"source sends from its cursor")
    return OK


def rebuild(args: argparse.Namespace) -> int:
    """``canalbridge rebuild JOB TABLE``: confirmed, then done by the daemon (which holds Spark)."""
    config = load(args, secrets=False)
    if not args.yes and not confirmed(f"a rebuild replaces the target of {args.table} with the source's rows",
                                      f"Replace the target of {args.table} (job {args.job}) with a new table, and "
                                      f"snapshot the source into it?", "nothing rebuilt"):
        return FAILED
    result = post_action(config, args.job, "rebuild", [("table", args.table)],
                         "a rebuild is done by the daemon: start it")
    print(f"job {result['name']}: {result['state']}, rebuilding {result['target']} from {result['tables'][0]}; "
          f"`canalbridge status` shows its snapshot")
    return OK


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
    """``canalbridge pause|resume JOB``, done by the daemon."""
    config = load(args, secrets=False)  # the request goes to the daemon, which holds the sources' secrets
    result = post_action(config, args.job, args.action)
    print(f"job {result['name']}: {result['state']}")
    return OK


def stop(args: argparse.Namespace) -> int:
    """``canalbridge stop JOB``: confirmed, then done by the daemon; the job is cancelled for good."""
    config = load(args, secrets=False)
    if not args.yes and not confirmed(f"a stop cancels job {args.job} for good",
                                      f"Stop job {args.job} for good? A cancelled job is not started again; "
                                      f"`pause` keeps it to resume.", "nothing stopped"):
        return FAILED
    result = post_action(config, args.job, "stop")
    print(f"job {result['name']}: {result['state']}")
    return OK


def post_action(config: Config, job: str, action: str, parameters: Sequence[tuple[str, str]] = (),
                unreachable: str = "") -> dict[str, Any]:
    """Ask the daemon to do ``action`` to ``job`` (``parameters``: name and value pairs) and return its answer; a
    refusal or no answer is printed and exits (``unreachable``: what to add when the daemon does not answer)."""
    body: dict[str, list[str]] = {}
    for name, value in parameters:
        body.setdefault(name, []).append(value)
    try:
        answer: dict[str, Any] = request(client_endpoint(config.daemon), "POST",
                                         f"/jobs/{quote(job, safe='')}/{action}", body)
        return answer
    except ControlUnreachable as exc:
        print(f"error: {exc}" + (f"; {unreachable}" if unreachable else ""), file=sys.stderr)
        raise CommandExit(UNREACHABLE) from None
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise CommandExit(FAILED) from None


def daemon_job(config: Config, job: str) -> dict[str, Any] | None:
    """``job``'s status from the daemon; None once why not is printed (it has no such job any more). A daemon that
    does not answer is printed and exits."""
    try:
        document = request(client_endpoint(config.daemon), "GET", "/status")
    except ControlUnreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise CommandExit(UNREACHABLE) from None
    except ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise CommandExit(FAILED) from None
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
