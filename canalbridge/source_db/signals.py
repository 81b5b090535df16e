"""The signal table: rows a snapshot writes into the source so that its watermarks travel in the stream.

A chunk of a snapshot is read between two watermarks, and the job must
know which of the stream's changes came between them. A position taken
with ``SHOW MASTER STATUS`` says where, but the stream passes it only once
something is written after it: Canal drops MySQL's heartbeats and most
empty transactions before a client sees them, so on a quiet source the
second watermark would never arrive. A row written into a small table
inside Canal's filter is in the stream for sure, in order with the changes
around it, whatever carries the stream (Canal over TCP, Canal's Kafka
topic in either format). So a window opens and closes with a signal row.
The user creating the table and granting INSERT on it is the price; the
docs give the statement (:data:`SIGNAL_TABLE_DDL`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from canalbridge.source_db.chunks import quote
from canalbridge.source_db.connection import SourceDb
from canalbridge.source_db.errors import SignalTableError, SourceDbAccessError

#: The signal table's columns, in order: the row's id, what it signals, and a JSON object about it.
SIGNAL_COLUMNS = ("id", "kind", "data")
#: How to create it (``{table}``: its quoted schema.table).
SIGNAL_TABLE_DDL = ("CREATE TABLE {table} (id VARCHAR(128) NOT NULL PRIMARY KEY, kind VARCHAR(16) NOT NULL, "
                    "data VARCHAR(2048) NOT NULL)")
_ID_CHARS, _DATA_CHARS = 128, 2048  # what the columns hold: a longer value may be cut short, never to parse
OPEN, CLOSE = "open", "close"
# A heartbeat row: one per job, rewritten each beat. It is no signal; its place in the binlog is what counts.
HEARTBEAT = "heartbeat"


@dataclass(frozen=True)
class Signal:
    """One signal row: ``kind`` (:data:`OPEN` or :data:`CLOSE`) of the window ``window``, with ``data``."""

    window: str
    kind: str
    data: Mapping[str, object]

    @property
    def row_id(self) -> str:
        return f"{self.window}:{self.kind}"

    @classmethod
    def from_row(cls, values: Mapping[str, str | None]) -> Signal | None:
        """The signal a row of the table holds (column name -> value as text), None if it holds none."""
        row_id, kind, data = (values.get(column) for column in SIGNAL_COLUMNS)
        if row_id is None or kind not in (OPEN, CLOSE) or not row_id.endswith(f":{kind}"):
            return None
        try:
            parsed = json.loads(data or "{}")
        except ValueError:
            return None
        return cls(row_id[: -len(kind) - 1], kind, parsed if isinstance(parsed, dict) else {})


class SignalTable:
    """Writes signal rows into ``schema.table`` of the source."""

    def __init__(self, db: SourceDb, schema: str, table: str) -> None:
        self._db = db
        self._schema, self._table = schema, table
        self.name = f"{schema}.{table}"
        self._sql = f"{quote(schema)}.{quote(table)}"

    def check(self) -> None:
        """Raise :class:`SignalTableError`, saying how to create it, unless the table has the signal columns."""
        rows = self._db.query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                              "AND TABLE_NAME = %s", (self._schema, self._table), table=self.name)
        missing = set(SIGNAL_COLUMNS) - {str(row[0]).lower() for row in rows}
        if missing:
            raise SignalTableError(
                f"the snapshot's signal table is missing or lacks columns {sorted(missing)}; create it with "
                f"{SIGNAL_TABLE_DDL.format(table=self._sql)}, grant the snapshot's user SELECT, INSERT and DELETE "
                "on it, and keep it inside Canal's filter", address=self._db.address, table=self.name)

    def check_writable(self) -> None:
        """Raise :class:`SignalTableError` unless the user may INSERT and DELETE signal rows (a DELETE by id
        reads them: SELECT too), tried in a transaction that is rolled back, so nothing reaches the binlog."""
        self._db.query("BEGIN", table=self.name)
        try:
            for statement in (f"INSERT INTO {self._sql} ({', '.join(SIGNAL_COLUMNS)}) VALUES ('check:open', 'open', "
                              "'{}')", f"DELETE FROM {self._sql} WHERE id = 'check:open'"):
                self._db.query(statement, table=self.name)
        except SourceDbAccessError as exc:
            raise SignalTableError(f"{exc.reason}; grant the snapshot's user SELECT, INSERT and DELETE on it",
                                   address=self._db.address, table=self.name) from None
        finally:
            self._db.query("ROLLBACK", table=self.name)

    def write(self, signal: Signal) -> None:
        """Insert ``signal``: it is in the binlog, after every change committed before, once this returns."""
        data = json.dumps(dict(signal.data), sort_keys=True)
        if len(signal.row_id) > _ID_CHARS or len(data) > _DATA_CHARS:
            raise ValueError(f"a signal row longer than its columns: {signal.row_id!r}")
        self._db.query(f"INSERT INTO {self._sql} ({', '.join(SIGNAL_COLUMNS)}) VALUES (%s, %s, %s)",
                       (signal.row_id, signal.kind, data), table=self.name)

    def beat(self, job: str, at_ms: int) -> None:
        """Write ``job``'s heartbeat row (REPLACE: the INSERT and DELETE the signal table's user has): once this
        returns it is in the binlog after every transaction committed before it, and ends a transaction of its
        own that the stream shows."""
        row_id = f"{HEARTBEAT}:{job}"[:_ID_CHARS]
        self._db.query(f"REPLACE INTO {self._sql} ({', '.join(SIGNAL_COLUMNS)}) VALUES (%s, %s, %s)",
                       (row_id, HEARTBEAT, json.dumps({"at_ms": at_ms})), table=self.name)

    def clear(self) -> None:
        """Delete every signal row: those a snapshot killed mid-window left. (A window's signals count once they
        are in the binlog: deleting the rows of a window still open, another job's, changes nothing.)"""
        # By its key: a server with sql_safe_updates refuses a DELETE whose WHERE uses no key.
        self._db.query(f"DELETE FROM {self._sql} WHERE id >= ''", table=self.name)

    def remove(self, window: str) -> None:
        """Delete the rows of ``window`` (their inserts stay in the binlog; the table stays small)."""
        self._db.query(f"DELETE FROM {self._sql} WHERE id IN (%s, %s)", (f"{window}:{OPEN}", f"{window}:{CLOSE}"),
                       table=self.name)
