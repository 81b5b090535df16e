"""The verify runner compares each chunk once the stream has landed its close signal, leaves out the keys the
stream changed since its open signal (up to the comparison), compares a chunk again when a DDL spoils it, and
fails a table, never the job, when the source fails.

The stream is played: each signal is routed the moment it is written, and the transaction that routes a close
signal lands at once; changes the test routes are noted as the Consumer would note them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db import KeyRange, Signal, SourceDbConnectionError, TableKey
from canalbridge.source_db.chunks import KeyColumn
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.settings import SnapshotSettings
from canalbridge.sync.snapshot import verify as verify_module
from canalbridge.sync.snapshot.chunk_window import CanalKey
from canalbridge.sync.snapshot.source import Differing, ReadRows, SnapshotSource
from canalbridge.sync.snapshot.verify import TableCheck, VerifyRunner, VerifyTable
from canalbridge.sync.snapshot.windows import Windows
from tests.unit.sync.snapshot.signal_rows import signal

TABLE = TableId("db", "t")
KEY = TableKey("db", "t", (KeyColumn("id", "int"),))
ROWS, CHUNK_ROWS = 6, 2  # keys 1..6: three chunks of one range each, then every key above 6


def update(key: int) -> entry_pb.RowChange:
    column = entry_pb.Column(name="id", value=str(key))
    return entry_pb.RowChange(eventType=entry_pb.EventType.UPDATE,
                              rowDatas=[entry_pb.RowData(beforeColumns=[column], afterColumns=[column])])


class Stream:
    """Routes signals as they are written; what the comparer is asked, and what the target differs in."""

    def __init__(self) -> None:
        self.windows = Windows(TableId("db", "canalbridge_signal"))
        self.differing: dict[int | None, set[int]] = {}  # a chunk's last key -> the keys the target differs in
        self.changed_during_read: dict[int, int] = {}  # a chunk's last key -> a key the stream changes meanwhile
        self.spoil_once_at: int | None = None  # a chunk's last key: a DDL lands during its comparison, once
        self.compared: list[tuple[int | None, frozenset[CanalKey]]] = []
        self.hold_at: int | None = None  # a chunk's last key: the transaction of its close signal never lands
        self.held = threading.Event()  # (set once it did not)
        self._last_read: int | None = None

    def route(self, written: Signal) -> None:
        self.windows.signal(signal(written.window, written.kind), label=f"txn-{written.window}")
        if written.kind == "close":
            if self.hold_at is not None and self._last_read == self.hold_at:
                self.held.set()
            else:
                self.windows.landed(f"txn-{written.window}", set())

    def read(self, ranges: Sequence[KeyRange]) -> ReadRows:
        through = self._last_read = _through(ranges)
        if through in self.changed_during_read:
            self.windows.note(TABLE, update(self.changed_during_read[through]))
        return ReadRows(("rows", through), 0 if through is None else CHUNK_ROWS)

    def compare(self, ranges: Sequence[KeyRange], noted: Callable[[], frozenset[CanalKey]]) -> Differing:
        through = _through(ranges)
        if self.spoil_once_at is not None and self.spoil_once_at == through:
            self.spoil_once_at = None
            self.windows.spoil(TABLE)
        keys = noted()
        self.compared.append((through, keys))
        differ = sorted(k for k in self.differing.get(through, set()) if (str(k),) not in keys)
        return Differing(len(differ), tuple(str(k) for k in differ))


def _through(ranges: Sequence[KeyRange]) -> int | None:
    """A chunk's last key (None: the last chunk, every key above the last one planned)."""
    through = ranges[-1].through
    return None if through is None else through[0]


class FakeSignals:
    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def check(self) -> None:
        pass

    def write(self, written: Signal) -> None:
        self.stream.route(written)

    def remove(self, window: str) -> None:
        pass


class FakePlanner:
    def __init__(self, db: object, key: TableKey, size: int) -> None:
        self.size = size

    def last_key(self) -> tuple[int]:
        return (ROWS,)

    def ranges(self, done: tuple[int] | None, last: tuple[int] | None) -> Iterator[KeyRange]:
        for through in range(self.size, ROWS + 1, self.size):
            yield KeyRange(None if through == self.size else (through - self.size,), (through,))


class FakeReader:
    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.released: list[object] = []

    def read(self, key: TableKey, columns: object, ranges: Sequence[KeyRange], where: str | None = None) -> ReadRows:
        return self.stream.read(ranges)

    def release(self, rows: object) -> None:
        self.released.append(rows)


class FakeComparer:
    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def differing(self, target: str, key: TableKey, columns: object, ranges: Sequence[KeyRange], rows: object,
                  noted: Callable[[], frozenset[CanalKey]], sample: int) -> Differing:
        assert target == "lake.db.t"
        return self.stream.compare(ranges, noted)


class FakeDb:
    def __enter__(self) -> FakeDb:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> Stream:
    stream = Stream()
    monkeypatch.setattr(verify_module, "table_key", lambda db, schema, table, key: KEY)
    monkeypatch.setattr(verify_module, "table_columns", lambda db, schema, table: [("id", "int(11)")])
    monkeypatch.setattr(verify_module, "ChunkPlanner", FakePlanner)
    monkeypatch.setattr(verify_module, "SignalTable", lambda db, schema, table: FakeSignals(stream))
    return stream


def verify_runner(stream: Stream, connect: Callable[[], object] = FakeDb) -> tuple[VerifyRunner, FakeReader]:
    settings = SnapshotSettings(host="h", user="u", signal_table="db.canalbridge_signal", chunk_rows=CHUNK_ROWS,
                                parallelism=1, land_timeout_seconds=60)
    reader = FakeReader(stream)
    runner = VerifyRunner("job", [VerifyTable("db", "t", "lake.db.t")], stream.windows,
                          SnapshotSource(connect, reader, FakeComparer(stream)), settings, threading.Event())
    return runner, reader


def verified(stream: Stream, connect: Callable[[], object] = FakeDb) -> tuple[TableCheck, FakeReader]:
    runner, reader = verify_runner(stream, connect)
    runner.start()
    assert runner.join(30) and runner.ended.is_set()
    return runner.checks()["db.t"], reader


def test_each_chunk_is_compared_once_landed_and_those_that_differ_come_with_the_condition_that_takes_them(stream):
    stream.differing = {4: {3}, None: {9}}  # (9: a row the target holds above the source's last key)
    check, reader = verified(stream)
    assert (check.phase, check.chunks, check.rows) == ("differs", 4, 6)
    assert [(d.after, d.through, d.keys, d.sample, d.where) for d in check.differences] == [
        ("2", "4", 1, ("3",), "((`id` > 2)) AND ((`id` <= 4))"), ("6", None, 1, ("9",), "((`id` > 6))")]
    assert reader.released == [("rows", 2), ("rows", 4), ("rows", 6), ("rows", None)]  # each dropped once compared
    assert not stream.windows.concerns(TABLE)  # every window forgotten


def test_a_key_the_stream_changed_since_the_open_signal_is_left_out_of_the_comparison(stream):
    stream.differing = {4: {3}}
    stream.changed_during_read = {4: 3}  # read on either side of the change: the target may not hold it yet
    check, _ = verified(stream)
    assert check.phase == "equal" and dict(stream.compared)[4] == {("3",)}


def test_a_ddl_during_a_comparison_compares_that_chunk_again(stream):
    stream.spoil_once_at = 4
    check, _ = verified(stream)
    assert check.phase == "equal" and [through for through, _ in stream.compared] == [2, 4, 4, 6, None]


def test_a_source_that_fails_fails_the_tables_check_and_says_why(stream):
    def gone() -> object:
        raise SourceDbConnectionError("cannot connect", address="127.0.0.1:3306")

    check, _ = verified(stream, gone)
    assert check.phase == "failed" and check.error == "source database 127.0.0.1:3306: cannot connect"


def test_a_cancelled_verify_drops_the_chunk_it_waits_for_and_keeps_what_it_found(stream):
    stream.differing = {2: {1}}
    stream.hold_at = 4  # the job is far behind: that chunk's close signal does not land
    runner, reader = verify_runner(stream)
    runner.start()
    assert stream.held.wait(30)
    runner.cancel()
    assert runner.join(30) and runner.ended.is_set(), "a cancel ends the wait for the stream"
    check = runner.checks()["db.t"]
    assert (check.phase, check.chunks) == ("cancelled", 1) and [d.through for d in check.differences] == ["2"]
    assert reader.released == [("rows", 2), ("rows", 4)]  # the chunk waited for is dropped too
    assert not stream.windows.concerns(TABLE)


def test_the_keys_written_since_the_check_began_are_compared_in_chunks_and_only_the_newest_in_an_open_range(
        stream, monkeypatch):
    class Growing(FakePlanner):
        """The table holds keys 1..6 when its check begins, and 1..10 once the first chunks are compared."""

        plans = 0

        def last_key(self) -> tuple[int]:
            Growing.plans += 1
            return (ROWS,) if Growing.plans == 1 else (ROWS + 4,)

        def ranges(self, done: tuple[int] | None, last: tuple[int] | None) -> Iterator[KeyRange]:
            start = 0 if done is None else done[0]
            for through in range(start + self.size, last[0] + 1, self.size):
                yield KeyRange(None if through == self.size else (through - self.size,), (through,))

    monkeypatch.setattr(verify_module, "ChunkPlanner", Growing)
    check, reader = verified(stream)
    assert check.phase == "equal" and check.chunks == 6
    # (An open range from 6 would read every row written since the check began on one connection.)
    assert reader.released == [("rows", 2), ("rows", 4), ("rows", 6), ("rows", 8), ("rows", 10), ("rows", None)]
