"""Flink CDC into Iceberg, the peer of :mod:`bench.peers`: its job's SQL, and one run of it in a JVM of its own.

The job is what a careful Flink CDC user writes for a MySQL database into
Iceberg (Flink 1.20.3, Flink CDC 3.5.0, Iceberg 1.10.1, fetched by ``make
flink-peer``): one ``mysql-cdc`` source table over every table of the
database (one binlog reader, with the ``table_name`` metadata column), one
``INSERT`` per Iceberg table, all in one statement set, so the planner reuses
the source; the Iceberg tables in a Hadoop catalog, format v2 with
``write.upsert.enabled`` (equality deletes, no read of the target), keyed by
the source's primary key; a checkpoint (and so an Iceberg commit) every
``checkpoint_s``. The binlog reader starts at a given file and offset, as
canalbridge's Canal does; or, for an initial load, the source starts in mode
``initial``: its incremental snapshot (chunks of its default 8096 keys read
by ``parallelism`` readers), then the binlog.

``deploy/maven/flink/harness/FlinkCdcPeer.java`` runs it in a local
MiniCluster and says when a sentinel key, or a count of records, is visible
in every table.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import cpu_seconds, rss_mb
from canalbridge.devkit.entries import TableDef
from canalbridge.devkit.progress import die_with_parent
from canalbridge.mysql_types import MySqlType
from tests.infra.artifacts import flink_peer_home, java_binary
from tests.infra.processes import tail

CATALOG = "ice"  # the Iceberg catalog's name inside the Flink job
HARNESS_CLASS = "canalbridge.peer.FlinkCdcPeer"
# What Flink's own launch scripts pass on Java 17 (its config.yaml's env.java.opts.all).
JAVA_17_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    *(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text",
        "java.time", "java.util", "java.util.concurrent", "java.util.concurrent.atomic",
        "java.util.concurrent.locks")),
)
PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class Source:
    """The MySQL server the job reads, where in its binlog it starts (None: a snapshot of the tables first,
    startup mode ``initial``), and the login (its password apart)."""

    host: str
    port: int
    user: str
    database: str
    start: tuple[str, int] | None = None  # binlog file and offset


@dataclass(frozen=True)
class FlinkRun:
    """One run until what it waited for was visible in every table."""

    seconds: float  # from the job's submission (the MiniCluster starts with it)
    seconds_from_launch: float  # from the JVM's launch (the job's planning included)
    cpu_s: float  # the JVM's, over ``seconds``
    cpu_from_launch_s: float
    peak_rss_mb: float


def flink_type(mysql_type: MySqlType) -> str:
    """The Flink SQL type of a column of the benchmark's tables."""
    base = mysql_type.base
    if base in ("bigint", "int"):
        return "BIGINT" if base == "bigint" else "INT"
    if base == "varchar":
        return "STRING"
    if base == "decimal":
        return f"DECIMAL({mysql_type.args[0]}, {mysql_type.scale})"
    if base == "datetime":
        return f"TIMESTAMP({mysql_type.fsp})"
    raise ValueError(f"no Flink type here for MySQL {mysql_type.declared!r}")


def job_sql(tables: Sequence[TableDef], source: Source, warehouse: Path, *, parallelism: int) -> str:
    """The job's statements, separated by lines holding ``;`` (``${password}`` stands for the password)."""
    columns = tables[0].columns  # the source table's shape: every table has it
    if any(table.columns != columns for table in tables):
        raise ValueError("one CDC source table reads every table: give them one shape")
    keys = ", ".join(f"`{name}`" for name in tables[0].key_names)
    typed = ", ".join(f"`{c.name}` {flink_type(c.mysql_type)}{' NOT NULL' if c.is_key else ''}" for c in columns)
    names = ", ".join(f"`{c.name}`" for c in columns)
    first_server_id = 5400  # a range, one per reader; Canal's parsers use 1000 and up
    statements = [
        # The source emits a full changelog, keyed as the sinks are: no materializing operator before them.
        "SET 'table.exec.sink.upsert-materialize' = 'NONE'",
        f"CREATE CATALOG {CATALOG} WITH ('type' = 'iceberg', 'catalog-type' = 'hadoop', "
        f"'warehouse' = 'file://{warehouse}', 'property-version' = '1')",
        f"CREATE DATABASE IF NOT EXISTS {CATALOG}.`{source.database}`",
        *(f"CREATE TABLE {CATALOG}.`{source.database}`.`{table.name}` ({typed}, PRIMARY KEY ({keys}) NOT ENFORCED) "
          "WITH ('format-version' = '2', 'write.upsert.enabled' = 'true')" for table in tables),
        f"CREATE TEMPORARY TABLE cdc_source (table_name STRING METADATA FROM 'table_name' VIRTUAL, {typed}, "
        f"PRIMARY KEY ({keys}) NOT ENFORCED) WITH ('connector' = 'mysql-cdc', 'hostname' = '{source.host}', "
        f"'port' = '{source.port}', 'username' = '{source.user}', 'password' = '${{password}}', "
        f"'database-name' = '{source.database}', "
        f"'table-name' = '({'|'.join(table.name for table in tables)})', 'server-time-zone' = 'UTC', "
        f"'server-id' = '{first_server_id}-{first_server_id + parallelism - 1}', "
        f"{_startup(source)})",
        *(f"INSERT INTO {CATALOG}.`{source.database}`.`{table.name}` SELECT {names} FROM cdc_source "
          f"WHERE table_name = '{table.name}'" for table in tables),
    ]
    return "\n;\n".join(statements) + "\n"


def _startup(source: Source) -> str:
    if source.start is None:
        return "'scan.startup.mode' = 'initial'"
    return ("'scan.startup.mode' = 'specific-offset', "
            f"'scan.startup.specific-offset.file' = '{source.start[0]}', "
            f"'scan.startup.specific-offset.pos' = '{source.start[1]}'")


def until_sentinel(key: str, value: int) -> str:
    """The harness's UNTIL for a replayed binlog: a data file holding ``value`` of column ``key``, larger than
    any other key written."""
    return f"sentinel:{key}={value}"


def until_records(rows: int) -> str:
    """The harness's UNTIL for an initial load: at least ``rows`` data records in each table."""
    return f"records:{rows}"


def run(root: Path, sql: str, warehouse: Path, database: str, tables: Sequence[str], until: str, *,
        password: str, parallelism: int, checkpoint_s: float, heap: str, timeout_s: float) -> FlinkRun:
    """Run the job until ``until`` (:func:`until_sentinel`, :func:`until_records`) holds in every table; its
    figures. The JVM's log is ``root/flink.log``; what of it reaches an error has the password masked."""
    home = flink_peer_home()
    root.mkdir(parents=True, exist_ok=True)
    job_file = root / "job.sql"
    job_file.write_text(sql, encoding="utf-8")
    log_file = root / "flink.log"
    command = [java_binary(), f"-Xms{heap}", f"-Xmx{heap}", *JAVA_17_OPTIONS, "-Duser.timezone=UTC",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", f"-Djava.io.tmpdir={root}",
               "-cp", f"{home / 'lib'}/*:{home / 'harness'}", HARNESS_CLASS,
               str(job_file), str(warehouse), str(parallelism), str(int(checkpoint_s * 1000)), until,
               str(int(timeout_s)), *(f"{database}.{table}" for table in tables)]
    launched = time.perf_counter()
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                   env={**os.environ, "PEER_MYSQL_PASSWORD": password}, text=True,
                                   preexec_fn=die_with_parent)
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process, lines), name="flink-stdout", daemon=True).start()
    submitted: float | None = None
    visible: float | None = None
    peak_rss = cpu_at_submission = 0.0
    landed, last_print = 0, launched
    deadline = launched + timeout_s + 120  # the harness gives up at timeout_s; this, if it cannot
    try:
        while visible is None:
            try:
                line = lines.get(timeout=PROGRESS_EVERY_S)
            except queue.Empty:
                line = ""
            if line is None:
                raise SystemExit(f"Flink ended (exit code {process.wait(timeout=30)}) before {until} held; "
                                 f"its log ({log_file}) ends:\n{_masked(tail(log_file), password)}")
            peak_rss = max(peak_rss, rss_mb(process.pid))
            now = time.perf_counter()
            if now > deadline:
                raise SystemExit(f"Flink did not report {until} in {timeout_s:g} s; its log ({log_file}) "
                                 f"ends:\n{_masked(tail(log_file), password)}")
            if line == "submitting":
                submitted, cpu_at_submission = now, cpu_seconds(process.pid)
            elif line.startswith("visible "):
                visible = float(line.split()[1])
            elif line.startswith("landed "):
                landed = int(line.split()[1])
            if visible is None and now - last_print >= PROGRESS_EVERY_S:
                last_print = now
                print(f"flink: [{now - launched:5.0f}s] {'running' if submitted else 'starting'}, waiting for "
                      f"{until} in every table; {landed:,} records landed; JVM CPU "
                      f"{cpu_seconds(process.pid):.0f} s", flush=True)
        cpu = cpu_seconds(process.pid)  # before it cancels the job
        seconds_from_launch = time.perf_counter() - launched
        assert process.stdin is not None
        process.stdin.write("stop\n")
        process.stdin.flush()
        if process.wait(timeout=120) != 0:
            raise SystemExit(f"Flink exited with {process.returncode}; its log ({log_file}) ends:\n"
                             f"{_masked(tail(log_file), password)}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return FlinkRun(visible, seconds_from_launch, cpu - cpu_at_submission, cpu, peak_rss)


def _masked(text: str, password: str) -> str:
    return text.replace(password, "******") if password else text


def _read_lines(process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line.strip())
    lines.put(None)
