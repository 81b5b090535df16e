"""``canalbridge demo``: the main job on its embedded default, verified table by table.

It generates a workload (every MySQL type, inserts, updates with
primary-key changes, deletes, DDL), serves it from the dev server in a
process of its own, writes a config, runs the daemon against it with Spark
local and a local Iceberg warehouse until the job has acked the last entry
(printing its progress), prints the status, and compares every target table
with the generator's expected table. Exit 0 only if all match; a daemon
that stops, a job that pauses or a dev server that dies ends it at once,
with the cause and exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from canalbridge.daemon.config import load_config
from canalbridge.daemon.logs import configure_logging
from canalbridge.daemon.status import render_text
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.entry_file import write_entries
from canalbridge.devkit.progress import DaemonThread, RunWatch, acked_through, die_with_parent
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition

PASSWORD_ENV = "CANALBRIDGE_DEMO_PASSWORD"
_CONFIG_TEMPLATE = """\
# Written by `{written_by}`.
[daemon]
state_dir = "state"
log_level = "warning"

[spark]
master = "local[2]"
warehouse = "warehouse"
{jars_dir}
[[job]]
name = "demo"
[job.canal]
host = "{host}"
port = {port}
destination = "{destination}"
username = "{user}"
password_env = "{password_env}"
batch_size = {batch_size}
poll_timeout_ms = 200
[job.commit]
interval_seconds = 2
min_events = 10000
min_bytes = 1048576
{channels}
"""


def demo_config(*, host: str, port: int, destination: str, user: str, batch_size: int, channels: str,
                written_by: str = "canalbridge demo", jars_dir: Path | None = None) -> str:
    """The TOML both demos write: one job ``demo``, the password from :data:`PASSWORD_ENV`."""
    jars = "" if jars_dir is None else f"jars_dir = {json.dumps(str(jars_dir.resolve()))}\n"
    return _CONFIG_TEMPLATE.format(written_by=written_by, host=host, port=port, destination=destination, user=user,
                                   password_env=PASSWORD_ENV, batch_size=batch_size, channels=channels,
                                   jars_dir=jars)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=5000, help="row changes to generate (default 5000)")
    parser.add_argument("--tables", type=int, default=3, help="source tables (default 3)")
    parser.add_argument("--workdir", type=Path, help="where config, state and warehouse go (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--jars-dir", type=Path,
                        help="a directory holding the jars Spark needs ([spark] jars_dir), for a host without "
                             "Maven access (default: Spark fetches them; in a checkout, its cache)")


def main(args: argparse.Namespace) -> int:
    """``canalbridge demo``: the dev server (``make demo-real`` runs the same against the real stack)."""
    return run(args)


def run(args: argparse.Namespace) -> int:
    from canalbridge.daemon.service import Daemon

    configure_logging("warning")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="canalbridge-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    tables = standard_tables(args.tables)
    workload = Workload(WorkloadSpec(tables=tables, row_changes=args.rows, pk_change_ratio=0.1, ddl_every=50,
                                     seed=args.seed))
    started = time.monotonic()
    print(f"generating {args.rows:,} row changes over {args.tables} tables", flush=True)
    entries_file = workdir / "entries.bin"
    last = _write(entries_file, workload)
    password = "demo-" + os.urandom(4).hex()
    os.environ[PASSWORD_ENV] = password
    with _dev_server(entries_file) as (server, port):
        print(f"dev server (pid {server.pid}) serves them on 127.0.0.1:{port}; starting the daemon", flush=True)
        channels = "\n".join(
            f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.demo.{t.name}"' for t in tables
        )
        config_path = workdir / "canalbridge.toml"
        config_path.write_text(demo_config(host="127.0.0.1", port=port, destination="demo", user="canal",
                                            batch_size=4096, channels=channels, jars_dir=args.jars_dir))
        config_path.chmod(0o600)
        runner = DaemonThread(Daemon(load_config(config_path))).start()
        try:
            watch = RunWatch(runner, "demo", checks=(lambda: _exited("the dev server", server),))
            outcome = watch.wait(lambda: acked_through(runner, "demo", last), timeout_s=1800)
            if outcome.reached:
                print(render_text(runner.daemon.status()))
                verdicts = _verify(workload, tables)
        finally:
            runner.stop()
    elapsed = time.monotonic() - started
    print(f"\n{args.rows} row changes through Canal's protocol into Iceberg in {elapsed:.1f} s (workdir {workdir})")
    if not outcome.reached:
        print(f"demo: FAILED: {outcome.reason}", flush=True)
        return 1
    for name, (rows, ok) in verdicts.items():
        print(f"  {name:<24} {rows:>7} rows  {'OK' if ok else 'MISMATCH'}")
    failures = sum(not ok for _, ok in verdicts.values())
    print("demo: all tables match" if not failures else f"demo: {failures} table(s) differ")
    return 0 if not failures else 1


def _write(path: Path, workload: Workload) -> EntryPosition:
    """Save the workload's entries for the dev server; the position of the last one."""
    last: list[EntryPosition] = []

    def noting(entries: Iterable[entry_pb.Entry]) -> Iterator[entry_pb.Entry]:
        for entry in entries:
            yield entry
        last.append(EntryPosition.of(entry))

    write_entries(path, noting(workload))
    return last[0]


@contextlib.contextmanager
def _dev_server(entries: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``canalbridge devserver`` in its own process (it could be killed apart from the demo), and its port."""
    command = [sys.executable, "-m", "canalbridge", "--log-level", "warning", "devserver", "--port", "0",
               "--destination", "demo", "--user", "canal", "--password-env", PASSWORD_ENV, "--entries", str(entries)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    try:
        line = server.stdout.readline() if server.stdout else ""  # ends when it listens, or when it exits
        match = re.search(r":(\d+) destination", line)
        if match is None:
            server.wait(30)
            raise SystemExit(f"demo: FAILED: the dev server did not start (exit status {server.returncode})")
        yield server, int(match.group(1))
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)


def _exited(name: str, process: subprocess.Popen[str]) -> str | None:
    """Why ``process`` is gone (its exit status or signal), or None while it runs."""
    status = process.poll()
    if status is None:
        return None
    how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
    return f"{name} (pid {process.pid}) {how} before every change was acked"


def _verify(workload: Workload, tables) -> dict[str, tuple[int, bool]]:  # type: ignore[no-untyped-def]
    from canalbridge.devkit.verify import expected_typed, read_typed
    from spark_sink.session import get_spark
    from spark_sink.settings import SparkSettings

    spark = get_spark(SparkSettings())  # the daemon's session, already running
    verdicts = {}
    for table in tables:
        expected = workload.expected[table.qualified]
        actual = read_typed(spark, f"lake.demo.{table.name}", table)
        verdicts[table.qualified] = (len(actual), actual == expected_typed(table, expected.rows.values()))
    return verdicts
