"""SQL into a real MariaDB, read back as the dev kit's logical values (real-stack tests and ``make demo-real``).

A :class:`Source` writes rows made by the dev kit's value generator with SQL
and reads tables back as the generator's logical values, so that
:mod:`canalbridge.devkit.verify` (the conversion rules of
``spark_sink/types.py``, written out independently) gives what Iceberg must
hold: :func:`expected_target`.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

from canalbridge.devkit.canal_values import ZERO_DATE, format_time
from canalbridge.devkit.catalog import ACCOUNTS_COLUMNS, ALL_TYPES_COLUMNS, ORDERS_COLUMNS
from canalbridge.devkit.entries import ColumnDef, TableDef
from canalbridge.devkit.values import random_value
from canalbridge.devkit.verify import expected_typed
from canalbridge.mysql_types import MySqlType
from tests.infra.mariadb import MariaDBServer

# Permissive, so zero dates can be written; UTC, as Canal's JVM runs (timestamps are rendered in its zone).
SESSION = ("SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'")


def create_sql(table: TableDef) -> str:
    columns = ", ".join(f"`{c.name}` {c.mysql_type.declared}{' NOT NULL' if c.is_key else ''}" for c in table.columns)
    keys = ", ".join(f"`{name}`" for name in table.key_names)
    return f"CREATE TABLE `{table.name}` ({columns}, PRIMARY KEY ({keys}))"


def sql_value(value: object, mysql_type: MySqlType) -> object:
    """A logical value as a PyMySQL parameter."""
    if value is None:
        return None
    if value is ZERO_DATE:
        return "0000-00-00" if mysql_type.base == "date" else "0000-00-00 00:00:00"
    if mysql_type.base == "timestamp":
        assert isinstance(value, dt.datetime)
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if mysql_type.base == "time":
        assert isinstance(value, dt.timedelta)
        return format_time(value, 6)
    return value


def logical(value: Any, mysql_type: MySqlType) -> object:
    """A value PyMySQL read back, as the generator's logical value."""
    base = mysql_type.base
    if value is None:
        return None
    if base == "bit":
        return int.from_bytes(value, "big")
    if base in ("date", "datetime", "timestamp") and isinstance(value, str):
        return ZERO_DATE  # PyMySQL hands back text for dates Python cannot hold
    if base == "timestamp":
        return value.replace(tzinfo=dt.UTC)
    if base == "set" and isinstance(value, set):
        return ",".join(label for label in mysql_type.labels if label in value)
    return value  # int, Decimal, float, str, bytes, date, naive datetime, timedelta: as the generator has them


class Source:
    """One connection to ``database`` in UTC, permissive, with a seeded random row maker."""

    def __init__(self, mariadb: MariaDBServer, database: str, tables: Sequence[TableDef], seed: int) -> None:
        self.mariadb = mariadb
        self.database = database
        self.rng = random.Random(seed)
        self.next_key = {table.name: 1 for table in tables}
        self.reconnect()

    def reconnect(self) -> None:
        """A new connection (after a MariaDB restart); keys and randomness carry on."""
        self.conn = self.mariadb.connect(self.database, autocommit=False)
        with self.conn.cursor() as cursor:
            for statement in SESSION:
                cursor.execute(statement)

    def row(self, table: TableDef, key: tuple[object, ...] | None = None) -> dict[str, object]:
        row: dict[str, object] = {}
        for column in table.columns:
            if column.is_key:
                continue
            null = self.rng.random() < 0.1
            row[column.name] = None if null else random_value(column.mysql_type, self.rng)
        keys = key if key is not None else self.new_key(table)
        row.update(zip(table.key_names, keys))
        return row

    def new_key(self, table: TableDef) -> tuple[object, ...]:
        number = self.next_key[table.name]
        self.next_key[table.name] += 1
        return (number,) if len(table.key_names) == 1 else (7, number)  # accounts: (tenant, id)

    def insert(self, table: TableDef, rows: Sequence[dict[str, object]]) -> None:
        names = [c.name for c in table.columns]
        marks = ", ".join(["%s"] * len(names))
        statement = f"INSERT INTO `{table.name}` ({', '.join(f'`{n}`' for n in names)}) VALUES ({marks})"
        values = [[sql_value(row[c.name], c.mysql_type) for c in table.columns] for row in rows]
        with self.conn.cursor() as cursor:
            if len(values) == 1:
                cursor.execute(statement, values[0])
            else:  # one multi-row statement
                cursor.execute(statement.split(" VALUES ")[0] + " VALUES " + ", ".join(
                    cursor.mogrify(f"({marks})", row) for row in values))

    def update(self, table: TableDef, key: tuple[object, ...], row: dict[str, object]) -> None:
        assignments = ", ".join(f"`{c.name}` = %s" for c in table.columns)
        where = " AND ".join(f"`{name}` = %s" for name in table.key_names)
        with self.conn.cursor() as cursor:
            cursor.execute(f"UPDATE `{table.name}` SET {assignments} WHERE {where}",
                           [sql_value(row[c.name], c.mysql_type) for c in table.columns] + list(key))

    def keys(self, table: TableDef) -> list[tuple[object, ...]]:
        with self.conn.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(f'`{n}`' for n in table.key_names)} FROM `{table.name}`")
            return sorted(tuple(row) for row in cursor.fetchall())

    def sql(self, statement: str, *args: object) -> None:
        with self.conn.cursor() as cursor:
            cursor.execute(statement, args or None)

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def rows(self, table: TableDef) -> list[dict[str, object]]:
        """``SELECT *``, but FLOAT read as DOUBLE: MariaDB prints a float with 6 digits, not its exact value."""
        columns = ", ".join(f"CAST(`{c.name}` AS DOUBLE) AS `{c.name}`" if c.mysql_type.base == "float"
                            else f"`{c.name}`" for c in table.columns)
        with self.conn.cursor() as cursor:
            cursor.execute(f"SELECT {columns} FROM `{table.name}`")
            names = [d[0] for d in cursor.description]
            types = {c.name: c.mysql_type for c in table.columns}
            return [{n: logical(v, types[n]) for n, v in zip(names, row)} for row in cursor.fetchall()]


def expected_target(source: Source, table: TableDef) -> dict[tuple, dict[str, object]]:
    """What the Iceberg target of ``table`` must hold now, keyed like :func:`~canalbridge.devkit.verify.read_typed`."""
    return expected_typed(table, source.rows(table))

UNSUBSCRIBED = "skipped"  # a table of the database that no channel reads


def mixed_tables(database: str) -> tuple[TableDef, ...]:
    """Every type, a composite key, and a table named by reserved words (`order`, with a column `select`)."""
    return (
        TableDef(database, "all_types", ALL_TYPES_COLUMNS),
        TableDef(database, "orders", ORDERS_COLUMNS),
        TableDef(database, "accounts", ACCOUNTS_COLUMNS),
        TableDef(database, "order", (ColumnDef.of("id", "int(11)", is_key=True),
                                     ColumnDef.of("select", "varchar(20)"))),
    )


def mixed_setup(tables: Sequence[TableDef]) -> list[str]:
    """The CREATE TABLE statements of ``tables`` and of :data:`UNSUBSCRIBED`."""
    return [create_sql(table) for table in tables] + [f"CREATE TABLE {UNSUBSCRIBED} (id INT PRIMARY KEY)"]


def mixed_workload(source: Source, tables: Sequence[TableDef], rounds: int = 30,
                   progress: Callable[[int], None] | None = None) -> None:
    """DML of many shapes into :func:`mixed_tables`; each numbered block is one MariaDB transaction.

    Multi-row statements with extremes and NULLs, transactions over several
    tables, a primary-key update, delete and re-insert of one key,
    rolled-back transactions, multi-row deletes, and a row into
    :data:`UNSUBSCRIBED` every round; the last transaction writes a synced
    table only. ``progress`` hears each finished round.
    """
    all_types, orders, accounts, reserved = tables
    # 1. Multi-row statements into every table, extremes and NULLs included.
    for table in tables:
        source.insert(table, [source.row(table) for _ in range(25)])
    source.commit()
    for round_number in range(rounds):
        # 2. Several tables in one transaction, several statements each.
        for table in (all_types, orders, accounts):
            keys = source.keys(table)
            key = source.rng.choice(keys)
            source.update(table, key, source.row(table, key))
            source.insert(table, [source.row(table)])
        # 3. An update that changes the primary key, and a delete then re-insert of one key.
        old = source.rng.choice(source.keys(orders))
        new = source.new_key(orders)
        source.sql("UPDATE orders SET id = %s WHERE id = %s", new[0], old[0])
        gone = source.rng.choice(source.keys(accounts))
        source.sql("DELETE FROM accounts WHERE tenant = %s AND id = %s", *gone)
        source.insert(accounts, [source.row(accounts, gone)])
        # 4. A table named by a reserved word, and a table no channel reads.
        source.sql("UPDATE `order` SET `select` = %s WHERE id = %s", f"round {round_number}",
                   source.rng.choice(source.keys(reserved))[0])
        source.sql(f"INSERT INTO {UNSUBSCRIBED} VALUES (%s)", round_number)
        source.commit()
        if round_number % 7 == 3:
            # 5. A rolled-back transaction: nothing of it may appear.
            source.sql("DELETE FROM orders")
            source.insert(all_types, [source.row(all_types)])
            source.rollback()
        if round_number % 5 == 0:
            # 6. A multi-row delete.
            source.sql("DELETE FROM all_types WHERE id IN (%s, %s)", *[k[0] for k in source.keys(all_types)[:2]])
            source.commit()
        if progress is not None:
            progress(round_number + 1)
    # 7. Last, a transaction of a synced table only. Canal drops the end of a transaction whose last
    # statement wrote only to a table no channel reads (docs/design/delivery-semantics.md), and callers
    # wait for the last transaction's end to be acked.
    source.sql("UPDATE `order` SET `select` = %s WHERE id = %s", "done", source.keys(reserved)[0][0])
    source.commit()


class PacedWriter:
    """Runs ``transaction(source)`` in a thread every ``every_s`` seconds until :meth:`finish`: faults land while
    it writes."""

    def __init__(self, source: Source, transaction: Callable[[Source], None], every_s: float = 0.1) -> None:
        self._source = source
        self._transaction = transaction
        self._every_s = every_s
        self._done = threading.Event()
        self.count = 0
        self.thread = threading.Thread(target=self._run, name="sql-writer")
        self.thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._every_s):  # the wait paces the writes; it synchronises nothing
            self._transaction(self._source)
            self.count += 1

    def finish(self) -> None:
        self._done.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the SQL writer did not finish"
        assert self.count > 0

