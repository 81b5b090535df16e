"""``make demo-real``: the demo against the whole real stack on this machine, verified table by table.

It starts a private MariaDB whose tables already hold rows and a real Canal
server that starts after them (both on loopback, from ``make real-stack``),
runs the daemon with a snapshot (``[job.snapshot]``: those rows are read from
MariaDB, over verified TLS, while the stream runs) with Spark local and a
local Iceberg warehouse, writes a mixed workload with SQL meanwhile (every type, several
tables per transaction, key changes, rollbacks, a table no channel reads),
waits until the snapshot finished and the last transaction is acked, prints
the status, and compares every target table with ``SELECT *`` of its
MariaDB table. Exit 0 only if all match.

Test infrastructure, not in the wheel: run it from a checkout,
``python -m tests.infra.demo_real [--rounds N] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from canalbridge.daemon.config import load_config
from canalbridge.daemon.logs import configure_logging
from canalbridge.daemon.status import render_text
from canalbridge.devkit.demo import PASSWORD_ENV, demo_config
from canalbridge.devkit.entries import TableDef
from canalbridge.devkit.progress import DaemonThread, RunWatch, acked_through
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.model.position import EntryPosition
from tests.infra.canal_server import CanalDestination, CanalServer
from tests.infra.mariadb import MariaDBServer
from tests.infra.processes import ServiceProcess
from tests.infra.sql_source import Source, expected_target, mixed_setup, mixed_tables, mixed_workload
from tests.infra.tls import make_certificates

DB = "demo"
SIGNALS = "canalbridge_signal"
SNAPSHOT_USER = "canalbridge_snapshot"
SNAPSHOT_PASSWORD_ENV = "CANALBRIDGE_DEMO_SNAPSHOT_PASSWORD"


def run(args: argparse.Namespace) -> int:
    """Run the demo; the exit code is 0 only if every table matches MariaDB."""
    from canalbridge.daemon.service import Daemon

    configure_logging("warning")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="canalbridge-demo-real-"))
    workdir.mkdir(parents=True, exist_ok=True)
    tables = mixed_tables(DB)
    started = time.monotonic()
    password = "demo-" + os.urandom(4).hex()
    os.environ[PASSWORD_ENV] = password
    print(f"starting MariaDB and Canal in {workdir}", flush=True)
    snapshot_password = "snap-" + os.urandom(4).hex()
    os.environ[SNAPSHOT_PASSWORD_ENV] = snapshot_password
    tls = make_certificates(workdir / "tls")  # the snapshot's user connects over verified TLS
    with MariaDBServer(workdir / "mariadb", tls=tls) as mariadb:
        mariadb.create_database(DB)
        mariadb.execute(*mixed_setup(tables), SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
        mariadb.snapshot_user(SNAPSHOT_USER, snapshot_password, DB, SIGNALS, require_tls=True)
        source = Source(mariadb, DB, tables, seed=args.seed)
        for table in tables:  # before Canal's start: only the snapshot brings these
            source.insert(table, [source.row(table) for _ in range(args.rows_before)])
        source.commit()
        print(f"MariaDB holds {args.rows_before} rows in each of {len(tables)} tables before Canal starts: the "
              f"snapshot brings them", flush=True)
        destination = CanalDestination(DB, filter_regex=rf"{DB}\..*")
        with CanalServer(workdir / "canal", mariadb, [destination], password=password) as canal:
            channels = "\n".join(
                f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.demo_real.{t.name}"' for t in tables
            )
            config_path = workdir / "canalbridge.toml"
            snapshot = (f'[job.snapshot]\nhost = "{mariadb.host}"\nport = {mariadb.port}\nuser = "{SNAPSHOT_USER}"\n'
                        f'password_env = "{SNAPSHOT_PASSWORD_ENV}"\nsignal_table = "{DB}.{SIGNALS}"\n'
                        f'tls = "verify-full"\ntls_ca = "{tls.ca}"\nchunk_rows = 50\nparallelism = 2\n\n')
            config_path.write_text(demo_config(host=canal.host, port=canal.port, destination=DB, user=canal.user,
                                               batch_size=1024, channels=snapshot + channels,
                                               written_by="make demo-real"))
            config_path.chmod(0o600)
            runner = DaemonThread(Daemon(load_config(config_path))).start()
            try:
                mixed_workload(source, tables, rounds=args.rounds, progress=lambda done: _progress(
                    f"SQL: {done}/{args.rounds} rounds written") if done % 10 == 0 or done == args.rounds else None)
                last = EntryPosition(*mariadb.last_event_start("Xid"))
                watch = RunWatch(runner, "demo", checks=(lambda: _stopped("MariaDB", mariadb),
                                                         lambda: _stopped("Canal", canal)))
                outcome = watch.wait(lambda: snapshot_finished(runner) and acked_through(runner, "demo", last),
                                     timeout_s=1800)
                if outcome.reached:
                    print(render_text(runner.daemon.status()))
                    verdicts = _verify(source, tables)
            finally:
                runner.stop()
    elapsed = time.monotonic() - started
    print(f"\nMariaDB -> Canal -> canalbridge -> Iceberg in {elapsed:.1f} s (workdir {workdir})")
    if not outcome.reached:
        print(f"demo: FAILED: {outcome.reason}", flush=True)
        return 1
    for name, (rows, ok) in verdicts.items():
        print(f"  {name:<24} {rows:>7} rows  {'OK' if ok else 'MISMATCH'}")
    failures = sum(not ok for _, ok in verdicts.values())
    print("demo: all tables match MariaDB" if not failures else f"demo: {failures} table(s) differ from MariaDB")
    return 0 if not failures else 1


def snapshot_finished(runner: DaemonThread) -> bool:
    """Whether the demo job's snapshot finished (in this run: the demo starts it on empty targets)."""
    job = runner.daemon.jobs.get("demo")  # (once the daemon has made it)
    snapshot = job.snapshot if job is not None else None
    return snapshot is not None and snapshot.finished.is_set()


def _progress(line: str) -> None:
    print(line, flush=True)


def _stopped(name: str, service: ServiceProcess) -> str | None:
    """Why a service the demo started is gone, or None while it runs."""
    return None if service.running else f"{name} (started by the demo) is no longer running"


def _verify(source: Source, tables: Sequence[TableDef]) -> dict[str, tuple[int, bool]]:
    from canalbridge.devkit.verify import read_typed
    from spark_sink.session import get_spark
    from spark_sink.settings import SparkSettings

    spark = get_spark(SparkSettings())  # the daemon's session, already running
    verdicts = {}
    for table in tables:
        actual = read_typed(spark, f"lake.demo_real.{table.name}", table)
        verdicts[table.qualified] = (len(actual), actual == expected_target(source, table))
    return verdicts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.infra.demo_real",
                                     description="the demo against a private MariaDB and a real Canal server")
    parser.add_argument("--rounds", type=int, default=60, help="SQL rounds to write (default 60)")
    parser.add_argument("--workdir", type=Path, help="where config, state and warehouse go (default: a temp dir)")
    parser.add_argument("--rows-before", type=int, default=300,
                        help="rows in each table before Canal starts, which the snapshot brings (default 300)")
    parser.add_argument("--seed", type=int, default=42)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
