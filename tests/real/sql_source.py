"""The MariaDB side of the real-stack tests that run the daemon: SQL rows, read back as logical values.

A :class:`Source` writes rows made by the dev kit's value generator with SQL
and reads tables back as the generator's logical values, so that
``canalbridge.devkit.verify`` (the conversion rules of ``spark_sink/types.py``,
written out independently) gives what Iceberg must hold.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from canalbridge.devkit.entries import TableDef
from canalbridge.devkit.values import random_value
from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.mysql_types import ZERO_DATE, MySqlType, format_time
from canalbridge.sync.position import EntryPosition
from tests.daemon_process import daemon_sections, job_section, job_status

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
    if base == "time":
        return value
    return value


class Source:
    """One connection to ``database`` in UTC, permissive, with a seeded random row maker."""

    def __init__(self, mariadb, database: str, tables: Sequence[TableDef], seed: int) -> None:
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


def assert_target_equals_source(spark, source: Source, table: TableDef, target: str) -> None:
    """The Iceberg target holds exactly the source table's rows, cell by cell."""
    expected = expected_typed(table, source.rows(table))
    actual = read_typed(spark, target, table)
    assert actual.keys() == expected.keys(), table.name
    for key, row in expected.items():
        assert actual[key] == row, (target, key)


def write_daemon_config(path: Path, canal, destination: str, warehouse: str, channels: str) -> Path:
    """A config with one job ``real`` reading ``destination`` of the real Canal; the password in the file (0600)."""
    password = canal.canal_settings(destination).password
    path.write_text(daemon_sections(warehouse) + job_section(
        "real", host=canal.host, port=canal.port, destination=destination, username=canal.user,
        credentials=f'password = "{password}"', batch_size=64, min_events=500, channels=channels))
    path.chmod(0o600)
    return path


def acked_through(config, position: EntryPosition) -> bool:
    status = job_status(config, "real")
    if status is None or status["ack_position"] is None:
        return False
    return EntryPosition.from_dict(status["ack_position"]) >= position
