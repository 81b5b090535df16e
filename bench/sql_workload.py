"""The real-stack benchmarks' source: row changes written with SQL into three 10-column MariaDB tables.

Each round is 100 row changes over two of the tables (they take turns): 30
inserts into each, then 30 updates of consecutive live rows of the first
and 10 deletes of the oldest rows of the second. Overall 60% inserts, 30%
updates, 10% deletes, as the dev-server benchmark's workload. By default a
round is two MariaDB transactions of multi-row statements, so a binlog
event holds many rows (``bench.real_stack``); the peer benchmark writes one
row per statement in transactions of several rounds (``bench.peers``).

:func:`write` runs in a process of its own (``multiprocessing`` spawn), so
that the SQL client does not take the GIL from the daemon's threads in a
live run. Row counts are checked against MariaDB's affected rows, so the
figure of row changes is exact.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pymysql
from pymysql.constants import CLIENT

from bench.common import bench_row
from canalbridge.devkit.catalog import narrow_table
from tests.infra.sql_source import create_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROUND_ROW_CHANGES = 100
INSERTS, UPDATES, DELETES = 30, 30, 10  # per statement
PROGRESS_EVERY_S = 5.0


def create_table_sql(schema: str, name: str) -> str:
    """``CREATE TABLE`` of a table shaped as the dev-server benchmark's (``narrow_table``, 10 columns)."""
    return create_sql(narrow_table(name, schema=schema))


def _row(key: int, round_number: int) -> str:
    return "(" + ",".join(f"'{value}'" for value in bench_row(key, round_number)) + ")"  # MySQL converts the text


def write(connect_arguments: dict[str, Any], tables: Sequence[str], rounds: int, *, rate: float = 0,
          seed: int = 1, label: str = "SQL", report: Callable[[dict[str, Any]], None] | None = None,
          single_row: bool = False, rounds_per_transaction: int = 0) -> dict[str, Any]:
    """Write ``rounds`` rounds (at ``rate`` row changes/s when given); return the row changes and seconds.

    ``single_row`` writes one statement per row (a binlog rows event each, as
    an OLTP application does) instead of one per 30 or 10 rows.
    ``rounds_per_transaction`` commits once every that many rounds (100 row
    changes each); 0 commits twice a round. The result also holds
    ``last_commit_from``: where the binlog ended before the last commit, so
    that finding the last transaction reads only it. Prints a progress line
    every few seconds. ``report``, if given, hears the result too (a queue's
    ``put`` when run in a process of its own).
    """
    rng = random.Random(seed)
    oldest = dict.fromkeys(tables, 1)  # each table's live keys are oldest .. next_key - 1
    next_key = dict.fromkeys(tables, 1)
    total = rounds * ROUND_ROW_CHANGES
    written = 0
    # A round's statements go to the server in one request; each still is its own statement in the binlog.
    conn = pymysql.connect(**{**connect_arguments, "autocommit": False, "client_flag": CLIENT.MULTI_STATEMENTS})
    started = last_report = time.monotonic()

    def run(cursor: Any, statements: list[tuple[str, int]]) -> None:
        nonlocal written
        cursor.execute(";".join(statement for statement, _ in statements))
        for number, (statement, expected) in enumerate(statements):
            if number and not cursor.nextset():
                raise RuntimeError(f"no result for {statement!r}")
            if cursor.rowcount != expected:
                raise RuntimeError(f"{statement!r} changed {cursor.rowcount} rows, not {expected}")
            written += expected

    def split(statement: str, keys: range, expected_each: int) -> list[tuple[str, int]]:
        if not single_row:
            return [(statement.format(keys=f"BETWEEN {keys[0]} AND {keys[-1]}"), len(keys) * expected_each)]
        return [(statement.format(keys=f"= {key}"), expected_each) for key in keys]

    try:
        with conn.cursor() as cursor:
            for round_number in range(rounds):
                if rate:  # pacing a load generator: the sleep is the point
                    ahead = started + round_number * ROUND_ROW_CHANGES / rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
                first, second = tables[round_number % len(tables)], tables[(round_number + 1) % len(tables)]
                inserts: list[tuple[str, int]] = []
                for table in (first, second):
                    keys = range(next_key[table], next_key[table] + INSERTS)
                    values = [_row(k, round_number) for k in keys]
                    inserts += ([(f"INSERT INTO `{table}` VALUES {value}", 1) for value in values] if single_row
                                else [(f"INSERT INTO `{table}` VALUES " + ",".join(values), INSERTS)])
                    next_key[table] += INSERTS
                start = rng.randrange(oldest[first], next_key[first] - UPDATES + 1)
                changes = split(f"UPDATE `{first}` SET c1 = c1 + 1, c5 = c5 + {round_number}, "
                                f"c7 = 'u{round_number}' WHERE id {{keys}}", range(start, start + UPDATES), 1)
                changes += split(f"DELETE FROM `{second}` WHERE id {{keys}}",
                                 range(oldest[second], oldest[second] + DELETES), 1)
                oldest[second] += DELETES
                last = round_number == rounds - 1
                if rounds_per_transaction:
                    run(cursor, inserts + changes)
                    commit = last or (round_number + 1) % rounds_per_transaction == 0
                else:
                    run(cursor, inserts)
                    conn.commit()
                    run(cursor, changes)
                    commit = True
                if last:
                    cursor.execute("SHOW MASTER STATUS")  # the transaction reaches the binlog at its commit
                    journal, position = cursor.fetchone()[:2]
                if commit:
                    conn.commit()
                now = time.monotonic()
                if now - last_report >= PROGRESS_EVERY_S or last:
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


SUMMARY_SQL = "SELECT COUNT(*), COALESCE(SUM(c1), 0), COALESCE(SUM(c5), 0) FROM {table}"


def table_summary(connect_arguments: dict[str, Any], table: str) -> dict[str, int]:
    """Rows and two checksums of a MariaDB table, to compare with its Iceberg target's (:func:`target_summary`)."""
    conn = pymysql.connect(**connect_arguments)
    try:
        with conn.cursor() as cursor:
            cursor.execute(SUMMARY_SQL.format(table=f"`{table}`"))
            rows, sum_c1, sum_c5 = cursor.fetchone()
    finally:
        conn.close()
    return {"rows": int(rows), "sum_c1": int(sum_c1), "sum_c5": int(sum_c5)}


def target_summary(spark: SparkSession, target: str) -> dict[str, int]:
    """:func:`table_summary`'s figures of an Iceberg table, read with Spark."""
    rows, sum_c1, sum_c5 = spark.sql(SUMMARY_SQL.format(table=target)).collect()[0]
    return {"rows": int(rows), "sum_c1": int(sum_c1), "sum_c5": int(sum_c5)}
