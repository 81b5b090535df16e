"""Where each chunk of a table's snapshot ends, planned one chunk ahead with keyset queries.

The last key is taken once, when the snapshot of the table starts: rows
with greater keys are written later, and reach the target through the
stream. Each chunk then ends at the ``size``-th key after the one before
(read from the key's index), or at that last key. A filter (a back-fill of
some rows) narrows every query to the rows it takes.
"""

from __future__ import annotations

from collections.abc import Iterator

from canalbridge.source_db.chunks import KeyRange, KeyValues, after, quote, through
from canalbridge.source_db.connection import SourceDb
from canalbridge.source_db.keys import TableKey


class ChunkPlanner:
    """Plans the chunks of one table's snapshot, resuming after a key if one was done already; with ``where``
    (a condition :func:`~canalbridge.source_db.filters.checked_filter` passed), of the rows it takes."""

    def __init__(self, db: SourceDb, key: TableKey, size: int, where: str | None = None) -> None:
        if size < 1:
            raise ValueError(f"a chunk holds at least one row, not {size}")
        self._db = db
        self.key = key
        self.size = size
        self.where = where
        self._columns = ", ".join(quote(c) for c in key.names)

    def last_key(self) -> KeyValues | None:
        """The greatest key the table holds now (None: it is empty), of the rows the filter takes."""
        order = ", ".join(f"{quote(c)} DESC" for c in self.key.names)
        where = f" WHERE ({self.where})" if self.where is not None else ""
        rows = self._db.query(f"SELECT {self._columns} FROM {self.key.sql_table}{where} ORDER BY {order} LIMIT 1",
                              table=self.key.name)
        return tuple(rows[0]) if rows else None

    def next_range(self, done: KeyValues | None, last: KeyValues) -> KeyRange:
        """The chunk after key ``done`` (None: the first), up to ``last`` at most."""
        conditions = [f"({through(self.key.columns, last)})"]
        if done is not None:
            conditions.insert(0, f"({after(self.key.columns, done)})")
        if self.where is not None:
            conditions.append(f"({self.where})")
        order = ", ".join(quote(c) for c in self.key.names)
        rows = self._db.query(
            f"SELECT {self._columns} FROM {self.key.sql_table} WHERE {' AND '.join(conditions)} "
            f"ORDER BY {order} LIMIT 1 OFFSET {self.size - 1}", table=self.key.name)
        return KeyRange(done, tuple(rows[0]) if rows else last)

    def ranges(self, done: KeyValues | None = None, last: KeyValues | None = None) -> Iterator[KeyRange]:
        """The chunks after ``done`` through ``last`` (taken now if None), planned as they are asked for."""
        if last is None:
            last = self.last_key()
            if last is None:
                return
        while done is None or done != last:
            keys = self.next_range(done, last)
            yield keys
            done = keys.through
