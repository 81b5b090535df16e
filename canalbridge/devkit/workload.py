"""A workload generator: realistic Canal entries plus the tables they should produce.

The generator keeps the current contents of every source table as it
writes changes, so the state it ends with is exactly what a correct target
must hold: :attr:`Workload.expected` after the entries are exhausted.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from canalbridge.devkit.canal_values import render
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.entries import BinlogWriter, Row, TableDef
from canalbridge.devkit.values import random_value
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

EventType = entry_pb.EventType
Key = tuple[object, ...]


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate. Weights are relative; ``pk_change_ratio`` is a share of updates."""

    tables: tuple[TableDef, ...] = field(default_factory=standard_tables)
    row_changes: int = 1000
    insert_weight: float = 0.6
    update_weight: float = 0.3
    delete_weight: float = 0.1
    pk_change_ratio: float = 0.1
    rows_per_transaction: tuple[int, int] = (1, 20)
    rows_per_event: int = 8
    null_ratio: float = 0.1
    ddl_every: int = 0  # emit a harmless DDL after every N transactions (0: never)
    seed: int = 42


@dataclass
class ExpectedTable:
    """The rows a target table must end with, keyed by primary key."""

    table: TableDef
    rows: dict[Key, Row] = field(default_factory=dict)
    # The keys again, in a list, so that a random row is picked in O(1).
    _keys: list[Key] = field(default_factory=list, repr=False)
    _slot: dict[Key, int] = field(default_factory=dict, repr=False)

    def key_of(self, row: Row) -> Key:
        return tuple(row[name] for name in self.table.key_names)

    def put(self, row: Row) -> None:
        key = self.key_of(row)
        if key not in self.rows:
            self._slot[key] = len(self._keys)
            self._keys.append(key)
        self.rows[key] = row

    def remove(self, key: Key) -> None:
        del self.rows[key]
        slot = self._slot.pop(key)
        last = self._keys.pop()
        if last != key:  # move the last key into the freed slot
            self._keys[slot] = last
            self._slot[last] = slot

    def random_key(self, rng: random.Random) -> Key:
        return self._keys[rng.randrange(len(self._keys))]

    def canal_rows(self) -> dict[Key, dict[str, str | None]]:
        """The rows as Canal text (None for NULL), keyed by the Canal text of the key."""
        rendered: dict[Key, dict[str, str | None]] = {}
        for row in self.rows.values():
            text_row = {}
            for column in self.table.columns:
                value = render(column.mysql_type, row[column.name])
                text_row[column.name] = None if value.is_null else value.text
            rendered[tuple(text_row[name] for name in self.table.key_names)] = text_row
        return rendered


class Workload:
    """Iterate for the entries (once); read :attr:`expected` when the iteration has ended."""

    def __init__(self, spec: WorkloadSpec | None = None, writer: BinlogWriter | None = None) -> None:
        self.spec = spec or WorkloadSpec()
        self.writer = writer or BinlogWriter()
        self._rng = random.Random(self.spec.seed)
        self._tables = {t.qualified: ExpectedTable(t) for t in self.spec.tables}
        self._table_list = list(self._tables.values())
        self._next_key = {t.qualified: 1 for t in self.spec.tables}
        self._started = False
        self.finished = False
        self.row_changes = 0
        self.counts = {"insert": 0, "update": 0, "delete": 0, "pk_change": 0, "ddl": 0}

    @property
    def expected(self) -> dict[str, ExpectedTable]:
        if not self.finished:
            raise RuntimeError("the workload's entries have not all been generated yet")
        return self._tables

    def __iter__(self) -> Iterator[entry_pb.Entry]:
        if self._started:
            raise RuntimeError("a Workload can be iterated only once")
        self._started = True
        return self._generate()

    # -- generation ------------------------------------------------------------------

    def _generate(self) -> Iterator[entry_pb.Entry]:
        spec = self.spec
        transactions = 0
        while self.row_changes < spec.row_changes:
            size = min(self._rng.randint(*spec.rows_per_transaction), spec.row_changes - self.row_changes)
            yield from self.writer.open()
            yield from self._transaction_body(size)
            yield self.writer.end()
            transactions += 1
            if spec.ddl_every and transactions % spec.ddl_every == 0:
                yield self._ddl()
        self.finished = True

    def _transaction_body(self, size: int) -> Iterator[entry_pb.Entry]:
        pending: list[tuple[Row | None, Row | None]] = []
        pending_key: tuple[str, entry_pb.EventType] | None = None
        for _ in range(size):
            expected = self._rng.choice(self._table_list)
            event_type, image = self._change(expected)
            group = (expected.table.qualified, event_type)
            if pending and (group != pending_key or len(pending) >= self.spec.rows_per_event):
                yield from self._flush(pending_key, pending)
                pending = []
            pending_key = group
            pending.append(image)
        if pending:
            yield from self._flush(pending_key, pending)

    def _flush(
        self, key: tuple[str, entry_pb.EventType] | None, images: list[tuple[Row | None, Row | None]]
    ) -> list[entry_pb.Entry]:
        assert key is not None
        table = self._tables[key[0]].table
        return self.writer.statement(table, key[1], list(images))

    def _change(self, expected: ExpectedTable) -> tuple[entry_pb.EventType, tuple[Row | None, Row | None]]:
        spec = self.spec
        self.row_changes += 1
        operation = "insert"
        if expected.rows:
            operation = self._rng.choices(
                ("insert", "update", "delete"), (spec.insert_weight, spec.update_weight, spec.delete_weight)
            )[0]
        if operation == "insert":
            row = self._new_row(expected.table)
            expected.put(row)
            self.counts["insert"] += 1
            return EventType.INSERT, (None, row)
        key = expected.random_key(self._rng)
        before = expected.rows[key]
        if operation == "delete":
            expected.remove(key)
            self.counts["delete"] += 1
            return EventType.DELETE, (before, None)
        after = dict(before)
        for column in expected.table.columns:
            if not column.is_key and self._rng.random() < 0.5:
                after[column.name] = self._value(column.mysql_type)
        if self._rng.random() < spec.pk_change_ratio:
            after.update(self._new_key(expected.table))
            self.counts["pk_change"] += 1
        expected.remove(key)
        expected.put(after)
        self.counts["update"] += 1
        return EventType.UPDATE, (before, after)

    def _new_key(self, table: TableDef) -> Row:
        serial = self._next_key[table.qualified]
        self._next_key[table.qualified] = serial + 1
        key: Row = {}
        for index, name in enumerate(table.key_names):
            # Composite keys: a small leading part (a tenant) and a unique serial.
            key[name] = serial % 7 if index < len(table.key_names) - 1 else serial
        return key

    def _new_row(self, table: TableDef) -> Row:
        row = self._new_key(table)
        for column in table.columns:
            if not column.is_key:
                row[column.name] = self._value(column.mysql_type)
        return row

    def _value(self, mysql_type: object) -> object:
        if self._rng.random() < self.spec.null_ratio:
            return None
        return random_value(mysql_type, self._rng)  # type: ignore[arg-type]

    def _ddl(self) -> entry_pb.Entry:
        table = self._rng.choice(self.spec.tables)
        self.counts["ddl"] += 1
        sql = f"ALTER TABLE `{table.schema}`.`{table.name}` COMMENT 'canalbridge {self.counts['ddl']}'"
        return self.writer.ddl(table.schema, table.name, EventType.ALTER, sql)
