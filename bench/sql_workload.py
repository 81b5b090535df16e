"""The real-stack benchmark's source: row changes written with SQL into three 10-column MariaDB tables.

Each round is two MariaDB transactions and 100 row changes over two of the
tables (they take turns): 30 inserts into each, then 30 updates of
consecutive live rows of the first and 10 deletes of the oldest rows of the
second. Overall 60% inserts, 30% updates, 10% deletes, as the dev-server
benchmark's workload; a binlog event holds many rows, as multi-row
statements make them.

:func:`write` runs in a process of its own (``multiprocessing`` spawn), so
that the SQL client does not take the GIL from the daemon's threads in a
live run. Row counts are checked against MariaDB's affected rows, so the
figure of row changes is exact.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import pymysql

from bench.common import bench_row
from canalbridge.devkit.catalog import narrow_table
from tests.infra.sql_source import create_sql

ROUND_ROW_CHANGES = 100
INSERTS, UPDATES, DELETES = 30, 30, 10  # per statement
PROGRESS_EVERY_S = 5.0


def create_table_sql(schema: str, name: str) -> str:
    """``CREATE TABLE`` of a table shaped as the dev-server benchmark's (``narrow_table``, 10 columns)."""
    return create_sql(narrow_table(name, schema=schema))


def _row(key: int, round_number: int) -> str:
    return "(" + ",".join(f"'{value}'" for value in bench_row(key, round_number)) + ")"  # MySQL converts the text


def write(connect_arguments: dict[str, Any], tables: Sequence[str], rounds: int, *, rate: float = 0,
          seed: int = 1, label: str = "SQL", report: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Write ``rounds`` rounds (at ``rate`` row changes/s when given); return the row changes and seconds.

    The result also holds ``last_commit_from``: where the binlog ended before
    the last commit, so that finding the last transaction reads only it.
    Prints a progress line every few seconds. ``report``, if given, hears the
    result too (a queue's ``put`` when run in a process of its own).
    """
    rng = random.Random(seed)
    oldest = dict.fromkeys(tables, 1)  # each table's live keys are oldest .. next_key - 1
    next_key = dict.fromkeys(tables, 1)
    total = rounds * ROUND_ROW_CHANGES
    written = 0
    conn = pymysql.connect(**{**connect_arguments, "autocommit": False})
    started = last_report = time.monotonic()

    def changed(cursor: Any, statement: str, expected: int, *args: object) -> None:
        nonlocal written
        cursor.execute(statement, args or None)
        if cursor.rowcount != expected:
            raise RuntimeError(f"{statement!r} changed {cursor.rowcount} rows, not {expected}")
        written += expected

    try:
        with conn.cursor() as cursor:
            for round_number in range(rounds):
                if rate:  # pacing a load generator: the sleep is the point
                    ahead = started + round_number * ROUND_ROW_CHANGES / rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
                first, second = tables[round_number % len(tables)], tables[(round_number + 1) % len(tables)]
                for table in (first, second):
                    keys = range(next_key[table], next_key[table] + INSERTS)
                    changed(cursor, f"INSERT INTO `{table}` VALUES " + ",".join(_row(k, round_number) for k in keys),
                            INSERTS)
                    next_key[table] += INSERTS
                conn.commit()
                start = rng.randrange(oldest[first], next_key[first] - UPDATES + 1)
                changed(cursor, f"UPDATE `{first}` SET c1 = c1 + 1, c5 = c5 + %s, c7 = %s WHERE id BETWEEN %s AND %s",
                        UPDATES, round_number, f"u{round_number}", start, start + UPDATES - 1)
                changed(cursor, f"DELETE FROM `{second}` WHERE id BETWEEN %s AND %s", DELETES,
                        oldest[second], oldest[second] + DELETES - 1)
                oldest[second] += DELETES
                if round_number == rounds - 1:
                    cursor.execute("SHOW MASTER STATUS")  # the transaction reaches the binlog at its commit
                    journal, position = cursor.fetchone()[:2]
                conn.commit()
                now = time.monotonic()
                if now - last_report >= PROGRESS_EVERY_S or round_number == rounds - 1:
                    last_report = now
                    print(f"{label}: {written:,}/{total:,} row changes written with SQL "
                          f"({written / (now - started):,.0f}/s)", flush=True)
    finally:
        conn.close()
    result = {"row_changes": written, "seconds": round(time.monotonic() - started, 1),
              "last_commit_from": (str(journal), int(position))}
    if report is not None:
        report(result)
    return result


def table_summary(connect_arguments: dict[str, Any], table: str) -> dict[str, int]:
    """Rows and two checksums of a MariaDB table, to compare with its Iceberg target."""
    conn = pymysql.connect(**connect_arguments)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*), COALESCE(SUM(c1), 0), COALESCE(SUM(c5), 0) FROM `{table}`")
            rows, sum_c1, sum_c5 = cursor.fetchone()
    finally:
        conn.close()
    return {"rows": int(rows), "sum_c1": int(sum_c1), "sum_c5": int(sum_c5)}
