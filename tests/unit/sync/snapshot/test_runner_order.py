"""The snapshot runner reads a chunk while the one before it commits, and still lands a table's chunks in key
order: a chunk's close signal is written only once the chunk before it landed, and a spoiled window drops
the chunk read ahead of it and goes on from the last chunk that landed.

The source database and the stream are played here: each signal is routed the moment the runner writes it,
and a closed chunk lands when the next read starts (its commit overlaps that read), or at once if it is the
table's last. A runner that waited for a chunk to land before it read the next would wait in vain.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pytest

from canalbridge.source_db import (
    CLOSE,
    OPEN,
    KeyRange,
    Signal,
    SourceDbAccessError,
    SourceDbConnectionError,
    SourceDbError,
    TableKey,
    TableKeyError,
)
from canalbridge.source_db.chunks import KeyColumn
from canalbridge.sync.errors import SnapshotError, SyncError
from canalbridge.sync.model.tables import TableId, TablePattern
from canalbridge.sync.settings import ChannelSettings, RetrySettings, SnapshotSettings
from canalbridge.sync.snapshot import runner as runner_module
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, WindowState
from canalbridge.sync.snapshot.progress import SnapshotStatus, TableProgress
from canalbridge.sync.snapshot.runner import SnapshotRunner, SnapshotTable
from canalbridge.sync.snapshot.source import ReadRows, SnapshotSource
from canalbridge.sync.snapshot.windows import Windows
from tests.unit.sync.snapshot.signal_rows import signal

TABLE = TableId("db", "t")
RENAMED = TableId("db", "t_v2")
KEY = TableKey("db", "t", (KeyColumn("id", "int"),))
ROWS, CHUNK_ROWS = 10, 2  # keys 1..10 in ranges of 2, one range per chunk (parallelism 1): 5 chunks
ESTIMATE = 12  # the server's estimate of the table's rows (information_schema's, which is rough)


@dataclass
class Played:
    """The stream and the source as the runner meets them, and what happened, in order."""

    windows: Windows
    spoil_at_read: int | None = None  # the read (counted from 1) during which a DDL on the table is routed
    cancel_at_read: int | None = None  # the read during which the snapshot is cancelled
    lose_at_read: int | None = None  # the read that fails because the source went away (before the one ahead lands)
    gone_connects: int = 0  # connections refused once the source went away, before it answers again
    lose_at_close: int | None = None  # the close signal (counted from 1) the server takes, its answer lost
    cancel_at_close: int | None = None  # the close signal (counted from 1) right after which the snapshot is cancelled
    drop_at_read: int | None = None  # the read during which the table is dropped (the read fails, the table is gone)
    drop_in_stream: bool = True  # the DROP is in the binlog (before the next signal), not outside what it shows
    dropped: bool = False
    rename_at_read: int | None = None  # the read during which the table is renamed to RENAMED, the job following it
    rename_lags: bool = False  # the read fails before the stream routed the RENAME (it comes before the next signal)
    renamed: bool = False
    _rename_pending: bool = False
    gone: bool = False
    cancel: Callable[[], None] = lambda: None
    runner: SnapshotRunner | None = None
    statuses: list[SnapshotStatus] = field(default_factory=list)  # the table's, as each read began
    events: list[tuple[str, object]] = field(default_factory=list)
    handles: list[object] = field(default_factory=list)  # each read's rows
    released: list[object] = field(default_factory=list)
    _closed: list = field(default_factory=list)

    def route(self, written: Signal) -> None:
        """The stream routes a signal row just written."""
        if self._rename_pending:  # (the RENAME is in the binlog before this signal)
            self.windows.moved(TABLE, RENAMED)
            self._rename_pending = False
        if self.dropped and self.drop_in_stream:  # (so is the DROP)
            self.windows.moved(TABLE, None)
        closed = self.windows.signal(signal(written.window, written.kind), label=f"txn-{written.window}")
        self.events.append((written.kind, written.window))
        self._closed += closed
        if any(window.chunk.progress.finished or not window.chunk.count for window in closed):
            self.land()  # (the table's last chunk, or a mark: the runner reads nothing more before it lands)

    def land(self) -> None:
        """The transactions that carry the closed chunks land."""
        for window in self._closed:
            self.windows.landed(window.label, set())
            self.events.append(("landed", window.chunk.progress.done))
        self._closed = []

    def read(self, ranges: list[KeyRange]) -> ReadRows:
        before = [window for window in self._closed if window.state is WindowState.CLOSED]
        if self.runner is not None:
            self.statuses.append(self.runner.status()["db.t"])
        self.events.append(("read", (ranges[0].through, len(before)) if ranges else None))
        if len(self.handles) + 1 == self.lose_at_read and not self.gone:
            self.gone, self.lose_at_read = True, None
            raise RuntimeError("Connection reset")  # (as the driver says it; the chunk before has not landed)
        self.land()  # the chunk before commits while this one is read
        if len(self.handles) + 1 == self.drop_at_read:
            self.dropped = True
            raise RuntimeError("Table 'db.t' doesn't exist")  # (as the driver says it)
        if len(self.handles) + 1 == self.rename_at_read:
            self.renamed, self.rename_at_read = True, None
            if self.rename_lags:
                self._rename_pending = True
                raise RuntimeError("Table 'db.t' doesn't exist")  # (as the driver says it)
            self.windows.moved(TABLE, RENAMED)  # (routed while the read goes on: the window is spoiled)
        self.handles.append(object())
        if len(self.handles) == self.spoil_at_read:
            self.windows.spoil(TABLE)
        if len(self.handles) == self.cancel_at_read:
            self.cancel()
        return ReadRows(self.handles[-1], sum(int(r.through[0]) - int(r.after[0] if r.after else 0) for r in ranges))


class FakeSignals:
    def __init__(self, played: Played) -> None:
        self.played = played

    def check(self) -> None:
        pass

    def clear(self) -> None:
        pass

    def write(self, written: Signal) -> None:
        self.played.route(written)
        closes = sum(1 for kind, _ in self.played.events if kind == CLOSE)
        if written.kind == CLOSE and closes == self.played.cancel_at_close:
            self.played.cancel()
        if written.kind == CLOSE and closes == self.played.lose_at_close:
            self.played.lose_at_close, self.played.gone = None, True
            self.played.land()  # (the stream met the signal, and the chunk landed, while the answer was lost)
            raise SourceDbConnectionError("connection failed or lost: gone", address="h:3306")

    def remove(self, window: str) -> None:
        pass


class FakePlanner:
    def __init__(self, db: object, key: TableKey, size: int, where: str | None = None) -> None:
        self.size = size

    def last_key(self) -> tuple[int]:
        return (ROWS,)

    def ranges(self, done: tuple[int] | None, last: tuple[int] | None) -> Iterator[KeyRange]:
        start = 0 if done is None else done[0]
        for through in range(start + self.size, ROWS + 1, self.size):
            yield KeyRange(None if through == self.size else (through - self.size,), (through,))


class FakeReader:
    def __init__(self, played: Played) -> None:
        self.played = played

    def read(self, key: TableKey, columns: object, ranges: list[KeyRange], where: str | None = None) -> ReadRows:
        return self.played.read(ranges)

    def release(self, rows: object) -> None:
        self.played.released.append(rows)
        self.played.events.append(("released", rows))


class FakeDb:
    address = "h:3306"

    def __init__(self, played: Played) -> None:
        self.played = played
        if played.gone:
            if played.gone_connects == 0:
                played.gone = False  # (back)
            else:
                played.gone_connects -= 1
                played.events.append(("refused", None))
                raise SourceDbConnectionError("connection failed or lost: refused", address=self.address)

    def query(self, sql: str, *args: object, **kwargs: object) -> list[tuple]:
        if self.played.gone:
            self.played.land()  # (the stream goes on meanwhile: the chunk closed before the loss lands)
            raise SourceDbConnectionError("connection failed or lost: gone", address=self.address)
        return [(1,)]

    def __enter__(self) -> FakeDb:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def played(monkeypatch: pytest.MonkeyPatch) -> Played:
    played = Played(Windows(TableId("db", "canalbridge_signal")))
    monkeypatch.setattr(runner_module, "table_key", lambda db, schema, table, key: KEY)
    monkeypatch.setattr(runner_module, "table_columns", lambda db, schema, table: [("id", "int(11)")])
    monkeypatch.setattr(runner_module, "table_rows_estimate", lambda db, schema, table: ESTIMATE)
    monkeypatch.setattr(runner_module, "ChunkPlanner", FakePlanner)
    monkeypatch.setattr(runner_module, "SignalTable", lambda db, schema, table: FakeSignals(played))
    return played


def run(played: Played, *, finishes: bool = True, announce: bool = False, cancelled: bool = False,
        tables: list[SnapshotTable] | None = None, filters: object = None,
        discover: Callable[[object], list[SnapshotTable]] | None = None) -> list[SyncError]:
    failures: list[SyncError] = []
    settings = SnapshotSettings(host="h", user="u", signal_table="db.canalbridge_signal", chunk_rows=CHUNK_ROWS,
                                parallelism=1, land_timeout_seconds=5)
    runner = SnapshotRunner("job", [SnapshotTable(*TABLE)] if tables is None else tables, played.windows,
                            SnapshotSource(lambda: FakeDb(played), FakeReader(played), filters=filters), settings,
                            threading.Event(),
                            failures.append, announce=announce, reconnect=RetrySettings(3, 0.01, 0.01),
                            discover=discover)
    played.cancel, played.runner = runner.cancel, runner
    if cancelled:
        runner.cancel()
    runner.start()
    assert runner.join(30)
    assert runner.finished.is_set() is finishes, failures
    return failures


def windows_made(monkeypatch: pytest.MonkeyPatch) -> list[ChunkWindow]:
    """Each window the runner makes from now on, in order."""
    made: list[ChunkWindow] = []
    window = runner_module.ChunkWindow

    def recorded(*args, **kwargs):
        made.append(window(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(runner_module, "ChunkWindow", recorded)
    return made


def test_each_chunk_is_read_while_the_one_before_commits_and_closed_only_once_that_one_landed(played):
    assert run(played) == []
    # Each read after the first began while the chunk before it was closed and not landed yet.
    assert [event for kind, event in played.events if kind == "read"] == [
        ((2,), 0), ((4,), 1), ((6,), 1), ((8,), 1), ((10,), 1)]
    landings = [done for kind, done in played.events if kind == "landed"]
    assert landings == [(2,), (4,), (6,), (8,), (10,)]
    closes = [index for index, (kind, _) in enumerate(played.events) if kind == CLOSE]
    landed_at = [index for index, (kind, _) in enumerate(played.events) if kind == "landed"]
    assert all(landed_at[n - 1] < closes[n] for n in range(1, len(closes))), played.events
    assert played.released == played.handles and len(played.handles) == 5  # each read's rows dropped once
    status = played.runner.status()["db.t"]
    assert (status.phase, status.chunks, status.rows, status.rows_done) == ("finished", 5, 10, 10)
    assert status.rows_estimate == ESTIMATE and status.seconds_left is None


def test_status_counts_the_rows_landed_over_every_run_against_the_servers_estimate(played):
    # A run resumed after 4 rows landed in an earlier one: the time left is of what the whole table has left.
    earlier = TableProgress("snap", "db.t", (ROWS,), (4,), key=("id",), rows=4)
    assert run(played, tables=[SnapshotTable(*TABLE, progress=earlier)]) == []
    # As each read began (keys 5-6, 7-8, 9-10): the third after the first chunk of this run landed.
    assert [(s.phase, s.rows, s.rows_done) for s in played.statuses] == [
        ("reading", 0, 4), ("reading", 0, 4), ("reading", 2, 6)]
    # No rate before a chunk landed; then (12 - 6 rows) at this run's rate (here, fast: about 0 s).
    assert played.statuses[0].seconds_left is None and played.statuses[2].seconds_left is not None
    status = played.runner.status()["db.t"]
    assert (status.phase, status.rows, status.rows_done, status.seconds_left) == ("finished", 6, 10, None)


def test_a_spoiled_window_drops_the_chunk_read_ahead_and_goes_on_from_the_last_chunk_that_landed(played):
    played.spoil_at_read = 3  # keys 5-6: read while 3-4 commits
    assert run(played) == []
    assert [event[0] for kind, event in played.events if kind == "read"] == [
        (2,), (4,), (6,), (8,), (6,), (8,), (10,)]  # 7-8 was read ahead of 5-6: dropped, read again after it
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,), (6,), (8,), (10,)]
    assert sorted(map(id, played.released)) == sorted(map(id, played.handles)) and len(played.handles) == 7
    assert played.runner.status()["db.t"].rows_done == 10  # (the rows of the dropped read counted once)
    assert not played.windows.concerns(TABLE)


def test_a_cancel_keeps_what_landed_and_lands_a_mark_that_the_table_is_done(played):
    played.cancel_at_read = 2  # keys 3-4, read while 1-2 commits
    assert run(played, finishes=False) == []
    assert [event for kind, event in played.events if kind == "read"] == [((2,), 0), ((4,), 1), None]
    # 1-2 landed; 3-4 was dropped unclosed; the mark (no row) landed with the progress at the last key.
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (10,)]
    opened = [window for kind, window in played.events if kind == OPEN]
    assert [window for kind, window in played.events if kind == CLOSE] == [opened[0], opened[2]]
    assert sorted(map(id, played.released)) == sorted(map(id, played.handles)) and len(played.handles) == 3
    assert not played.windows.concerns(TABLE)


def test_a_snapshot_asked_for_while_the_job_runs_lands_its_progress_before_any_chunk(played):
    # The target holds a finished snapshot: until this one's progress lands, a restart would not take it up.
    assert run(played, announce=True) == []
    assert next(event for kind, event in played.events if kind == "read") is None  # (the mark reads nothing)
    assert [done for kind, done in played.events if kind == "landed"] == [None, (2,), (4,), (6,), (8,), (10,)]



def test_a_source_that_goes_away_mid_read_is_tried_again_after_the_closed_chunk_landed(played):
    # Keys 5-6 are being read, 3-4 closed and committing, when the source goes away; it refuses one connection,
    # then answers. 3-4 lands still (the stream carries its close signal), 5-6 is dropped and read again.
    played.lose_at_read, played.gone_connects = 3, 1
    assert run(played) == []
    assert [event[0] for kind, event in played.events if kind == "read"] == [(2,), (4,), (6,), (6,), (8,), (10,)]
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,), (6,), (8,), (10,)]
    assert ("refused", None) in played.events
    assert sorted(map(id, played.released)) == sorted(map(id, played.handles))
    assert played.runner.status()["db.t"].rows_done == 10 and not played.windows.concerns(TABLE)


def test_tables_found_at_the_first_connection_are_snapshotted_and_a_reconnect_does_not_look_again(played):
    # (A rule's tables: the job gives none, the source holds one.) The source goes away mid-snapshot.
    played.lose_at_read, played.gone_connects = 3, 1
    looked: list[object] = []

    def discover(db: object) -> list[SnapshotTable]:
        looked.append(db)
        return [SnapshotTable(*TABLE)]

    assert run(played, tables=[], discover=discover) == []
    assert len(looked) == 1 and ("refused", None) in played.events
    assert [table.name for table in played.runner.tables] == ["db.t"]
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,), (6,), (8,), (10,)]
    assert played.runner.status()["db.t"].phase == "finished"


def test_a_snapshot_that_only_looks_for_a_patterns_tables_and_fails_to_leaves_the_stream_alone(played):
    def discover(db: object) -> list[SnapshotTable]:
        raise SnapshotError("db.t", "two tables into one target")

    assert run(played, tables=[], discover=discover, finishes=False) == [], "the job does not pause"
    assert played.events == []


def key_unless_gone(db: object, schema: str, table: str, key: object) -> TableKey:
    """The source's answer for a table's key, where the table ``gone`` was dropped."""
    if table == "gone":
        raise SourceDbAccessError("no such table", address="h:3306", table=f"{schema}.{table}", missing=True)
    return KEY


def test_a_patterns_table_dropped_before_its_turn_is_left_and_the_others_go_on(played, monkeypatch):
    monkeypatch.setattr(runner_module, "table_key", key_unless_gone)
    rule = ChannelSettings("db.*", "lake.db.{table}", pattern=TablePattern("db.*"))
    made = replace(rule, source="db.gone", target="lake.db.gone", pattern=None, rule="db.*")
    assert run(played, tables=[], discover=lambda db: [SnapshotTable("db", "gone", channel=made),
                                                       SnapshotTable(*TABLE)]) == []
    status = played.runner.status()
    assert status["db.gone"].phase == "gone" and status["db.t"].phase == "finished"


def test_a_patterns_table_dropped_before_its_resync_began_is_left_and_the_others_go_on(played, monkeypatch):
    monkeypatch.setattr(runner_module, "table_key", key_unless_gone)
    rule = ChannelSettings("db.*", "lake.db.{table}", pattern=TablePattern("db.*"))
    made = replace(rule, source="db.gone", target="lake.db.gone", pattern=None, rule="db.*")
    assert run(played, announce=True, tables=[SnapshotTable("db", "gone", channel=made), SnapshotTable(*TABLE)]) == []
    status = played.runner.status()
    assert status["db.gone"].phase == "gone" and status["db.t"].phase == "finished"


def test_the_shards_a_merged_target_takes_show_as_its_one_channel(played, monkeypatch):
    monkeypatch.setattr(runner_module, "table_key", key_unless_gone)
    rule = ChannelSettings("db.*", "lake.db.all", pattern=TablePattern("db.*"))
    merged = replace(rule, pattern=None, rule="db.*", merged=True)
    assert run(played, tables=[], discover=lambda db: [SnapshotTable("db", "gone", channel=merged),
                                                       SnapshotTable(*TABLE, channel=merged)]) == []
    shown = played.runner.channel_status()
    assert list(shown) == ["db.*"], "one channel, named by its rule"
    assert (shown["db.*"].phase, shown["db.*"].chunks, shown["db.*"].rows) == ("finished", 5, 10)


def test_a_source_gone_for_longer_than_the_reconnect_attempts_pauses_the_job_naming_the_table(played):
    played.lose_at_read, played.gone_connects = 3, 99
    (failure,) = run(played, finishes=False)
    assert "snapshot of table db.t: source database h:3306:" in str(failure), failure
    assert "tried 3 times in a row" in str(failure), failure
    # In a row, with nothing landed between them: the loss during the read came after 1-2 and 3-4 landed, so
    # the count begins after it, and 3 refusals end it.
    assert played.events.count(("refused", None)) == 3
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,)]  # what a resume goes on from
    assert not played.windows.concerns(TABLE)


def landing_meanwhile(played: Played, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream commits what is closed while the runner waits for it (not only while it reads)."""
    waited = runner_module.wait_landed

    def landing(*args, **kwargs):
        played.land()
        return waited(*args, **kwargs)

    monkeypatch.setattr(runner_module, "wait_landed", landing)


def test_a_read_that_fails_while_the_source_answers_parks_the_table_once_its_closed_chunk_landed(played,
                                                                                                monkeypatch):
    played.lose_at_read = 3
    landing_meanwhile(played, monkeypatch)

    def answers(db: FakeDb, sql: str, *args: object, **kwargs: object) -> list[tuple]:
        return [(1,)]

    monkeypatch.setattr(FakeDb, "query", answers)
    assert run(played) == [], "the job does not pause"
    status = played.runner.status()["db.t"]
    assert status.phase == "parked" and "reading keys" in status.error and "Connection reset" in status.error
    assert "tried" not in status.error
    assert "canalbridge snapshot job db.t" in status.error and "canalbridge snapshot --cancel job" in status.error
    # Keys 3-4 were closed when 5-6 failed: in the stream's transaction, they land before their rows are dropped.
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,)]
    assert status.done == "4" and [t.name for t in played.runner.parked()] == ["db.t"]
    assert sorted(map(id, played.released)) == sorted(map(id, played.handles))


def test_a_close_signal_the_server_took_though_its_answer_was_lost_lands_its_chunk_once(played):
    # The close of keys 3-4 is in the binlog, and its chunk landed, but the write failed: 3-4 is not read again.
    played.lose_at_close = 2
    assert run(played) == []
    assert [event[0] for kind, event in played.events if kind == "read"] == [(2,), (4,), (6,), (8,), (10,)]
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,), (6,), (8,), (10,)]


def test_a_table_to_rebuild_lands_a_mark_that_replaces_its_target_and_plans_its_keys_only_after_it(played,
                                                                                                   monkeypatch):
    planned_at: list[int] = []  # the events before each plan of the table's keys

    class Planner(FakePlanner):
        def last_key(self) -> tuple[int]:
            planned_at.append(len(played.events))
            return super().last_key()

    monkeypatch.setattr(runner_module, "ChunkPlanner", Planner)
    windows = windows_made(monkeypatch)
    assert run(played, tables=[SnapshotTable(*TABLE, rebuild=True)]) == []
    assert [w.replaces for w in windows] == [True, False, False, False, False, False]
    assert next(event for kind, event in played.events if kind == "read") is None  # (the mark reads nothing)
    assert [done for kind, done in played.events if kind == "landed"] == [None, (2,), (4,), (6,), (8,), (10,)]
    mark_landed = next(index for index, (kind, _) in enumerate(played.events) if kind == "landed")
    # A row written before the mark's close signal, whatever its key, is below the last key planned.
    assert planned_at and all(at > mark_landed for at in planned_at)
    assert windows[0].chunk.count == 0 and not windows[0].chunk.progress.planned  # (a restart plans them then)
    assert played.runner.status()["db.t"].phase == "finished"


def test_a_cancel_right_after_a_close_signal_lands_that_chunk_before_its_rows_are_dropped(played, monkeypatch):
    # The chunk is in the stream's open transaction: its rows must outlive the commit that applies them.
    played.cancel_at_close = 1  # keys 1-2 closed; the cancel comes before the next read
    landing_meanwhile(played, monkeypatch)
    assert run(played, finishes=False) == []
    landed = [index for index, (kind, done) in enumerate(played.events) if kind == "landed" and done == (2,)]
    dropped = [index for index, (kind, rows) in enumerate(played.events) if kind == "released"
               and rows is played.handles[0]]
    assert landed and dropped and landed[0] < dropped[0], played.events
    assert played.runner.status()["db.t"].phase == "cancelled"


def test_a_patterns_table_dropped_while_a_chunk_is_read_is_left_as_gone(played, monkeypatch):
    def columns(db, schema, table):
        if played.dropped:
            raise SourceDbAccessError("no such table", address="h:3306", table=f"{schema}.{table}", missing=True)
        return [("id", "int(11)")]

    monkeypatch.setattr(runner_module, "table_columns", columns)
    played.drop_at_read = 2
    made = ChannelSettings("db.t", "lake.db.t", rule="db.*")
    assert run(played, tables=[SnapshotTable(*TABLE, channel=made)]) == []  # (the job does not pause)
    assert played.runner.status()["db.t"].phase == "gone"



def key_error_for(name: str) -> Callable[..., TableKey]:
    def key(db: object, schema: str, table: str, key: object) -> TableKey:
        if table == name:
            raise TableKeyError("the table has no primary key; set the channel's key", address="h:3306",
                                table=f"{schema}.{table}")
        return KEY

    return key


def test_a_table_whose_snapshot_cannot_go_on_is_parked_saying_what_to_do_and_the_next_one_is_snapshotted(
        played, monkeypatch):
    monkeypatch.setattr(runner_module, "table_key", key_error_for("keyless"))
    assert run(played, tables=[SnapshotTable("db", "keyless"), SnapshotTable(*TABLE)]) == [], "the job runs on"
    status = played.runner.status()
    assert status["db.keyless"].phase == "parked" and "has no primary key" in status["db.keyless"].error
    assert "its changes stream on" in status["db.keyless"].error
    assert "canalbridge snapshot --cancel job" in status["db.keyless"].error
    assert status["db.t"].phase == "finished"
    assert [t.name for t in played.runner.parked()] == ["db.keyless"]


def test_a_back_fill_whose_condition_the_source_refuses_is_parked(played, monkeypatch):
    class Refusing(FakePlanner):
        def ranges(self, done: tuple[int] | None, last: tuple[int] | None) -> Iterator[KeyRange]:
            raise SourceDbError("Unknown column 'gone' in 'where clause' (error 1054)", address="h:3306",
                                table="db.t")

    monkeypatch.setattr(runner_module, "ChunkPlanner", Refusing)
    earlier = TableProgress("snap", "db.t", (ROWS,), (4,), key=("id",), where="gone > 1")
    assert run(played, tables=[SnapshotTable(*TABLE, progress=earlier)]) == []
    status = played.runner.status()["db.t"]
    assert status.phase == "parked" and "Unknown column 'gone'" in status.error and status.done == "4"


def test_a_signal_table_the_source_refuses_still_pauses_the_job(played, monkeypatch):
    written = FakeSignals.write

    def refused(self, signal: Signal) -> None:
        if signal.kind == OPEN and sum(kind == OPEN for kind, _ in self.played.events) == 2:
            raise SourceDbError("INSERT command denied (error 1142)", address="h:3306", table="db.canalbridge_signal")
        written(self, signal)

    monkeypatch.setattr(FakeSignals, "write", refused)
    landing_meanwhile(played, monkeypatch)
    (failure,) = run(played, finishes=False)
    assert "INSERT command denied" in str(failure)
    # (The third chunk's open signal failed: the second, closed before it, landed.)
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,)]


def test_reads_of_two_tables_that_fail_alike_are_not_one_tables_and_pause_the_job(played, monkeypatch):
    def failing(ranges: list[KeyRange]) -> ReadRows:
        raise RuntimeError("Communications link failure: the driver cannot reach the source")

    monkeypatch.setattr(played, "read", failing)
    (failure,) = run(played, tables=[SnapshotTable("db", "a"), SnapshotTable("db", "b")], finishes=False)
    assert "the read of db.a failed the same way" in str(failure)
    assert played.runner.status()["db.a"].phase == "parked"


def test_a_table_whose_windows_are_spoiled_every_time_is_parked_not_read_for_ever(played, monkeypatch):
    spoiling = played.read

    def read(ranges: list[KeyRange]) -> ReadRows:
        rows = spoiling(ranges)
        played.windows.spoil(TABLE)  # (DDL on the table during every read)
        return rows

    monkeypatch.setattr(played, "read", read)
    assert run(played) == []
    status = played.runner.status()["db.t"]
    assert status.phase == "parked" and f"read {runner_module.SPOILED_TRIES} times in a row" in status.error


def test_a_cancel_of_a_table_whose_key_cannot_be_read_lands_a_mark_without_a_key(played, monkeypatch):
    monkeypatch.setattr(runner_module, "table_key", key_error_for("t"))
    made = windows_made(monkeypatch)
    assert run(played, cancelled=True, finishes=False) == []
    assert [done for kind, done in played.events if kind == "landed"] == [None]
    (mark,) = made
    assert mark.key_columns == () and mark.chunk.progress.finished and mark.chunk.progress.key == ()
    assert played.runner.status()["db.t"].phase == "cancelled"


@pytest.mark.parametrize("lags", [False, True], ids=["routed-during-the-read", "read-fails-first"])
def test_a_table_renamed_mid_snapshot_under_a_job_that_follows_it_is_read_on_under_its_new_name(
        played, monkeypatch, lags):
    names: list[str] = []

    def key(db, schema, table, key):
        names.append(table)
        if table == "t" and played.renamed:
            raise SourceDbAccessError("no such table", address="h:3306", table=f"{schema}.{table}", missing=True)
        return TableKey(schema, table, KEY.columns)

    def columns(db, schema, table):
        if table == "t" and played.renamed:
            raise SourceDbAccessError("no such table", address="h:3306", table=f"{schema}.{table}", missing=True)
        return [("id", "int(11)")]

    monkeypatch.setattr(runner_module, "table_key", key)
    monkeypatch.setattr(runner_module, "table_columns", columns)
    made = windows_made(monkeypatch)
    played.rename_at_read, played.rename_lags = 3, lags  # keys 5-6, read while 3-4 commits
    assert run(played) == []
    assert [done for kind, done in played.events if kind == "landed"] == [(2,), (4,), (6,), (8,), (10,)]
    assert names[0] == "t" and names[-1] == "t_v2"
    chunks = [w for w in made if w.applies]
    assert chunks[-1].table == RENAMED and chunks[-1].state is WindowState.LANDED
    assert chunks[-1].chunk.progress.table == "db.t", "its progress is kept under the channel's table"
    assert played.runner.status()["db.t"].phase == "finished"


@pytest.mark.parametrize("in_stream", [True, False], ids=["dropped-in-the-stream", "not-there-for-the-user"])
def test_a_named_table_missing_mid_snapshot_is_gone_if_the_stream_dropped_it_else_parked(played, monkeypatch,
                                                                                         in_stream):
    def columns(db, schema, table):
        if played.dropped:
            raise SourceDbAccessError("no such table", address="h:3306", table=f"{schema}.{table}", missing=True)
        return [("id", "int(11)")]

    monkeypatch.setattr(runner_module, "table_columns", columns)
    monkeypatch.setattr(runner_module, "table_key", lambda db, schema, table, key: KEY if not played.dropped else
                        columns(db, schema, table))
    played.drop_at_read, played.drop_in_stream = 2, in_stream
    assert run(played) == []  # (the job runs on)
    status = played.runner.status()["db.t"]
    assert status.phase == ("gone" if in_stream else "parked")
    if not in_stream:  # (dropped outside what the stream shows, or a grant revoked: the user says which)
        assert "no such table" in status.error


class Ledger:
    """The back-fill conditions a user asked for, as the daemon's state store keeps them."""

    def __init__(self, played: Played) -> None:
        self.played = played
        self.asked: dict[str, TableProgress] = {}

    def remember(self, job: str, progress: TableProgress) -> None:
        self.played.events.append(("remembered", progress.where))
        self.asked[progress.table] = progress

    def knows(self, job: str, progress: TableProgress) -> bool:
        asked = self.asked.get(progress.table)
        return asked is not None and (asked.snapshot, asked.where) == (progress.snapshot, progress.where)


def test_a_back_fill_condition_its_target_holds_that_no_user_asked_for_is_parked_not_run(played, monkeypatch):
    planned: list[str | None] = []

    class Planner(FakePlanner):
        def __init__(self, db, key, size, where=None) -> None:
            super().__init__(db, key, size, where)
            planned.append(where)

    monkeypatch.setattr(runner_module, "ChunkPlanner", Planner)
    # (A summary anyone who can commit to the target could have written.)
    written = TableProgress("snap", "db.t", (ROWS,), (4,), key=("id",), where="id > 0 AND SLEEP(10) = 0")
    assert run(played, tables=[SnapshotTable(*TABLE, progress=written)], filters=Ledger(played)) == []
    status = played.runner.status()["db.t"]
    assert status.phase == "parked" and "SLEEP(10)" in status.error and "is not run" in status.error
    assert planned == [] and not [kind for kind, _ in played.events if kind == "read"]


def test_a_back_fill_a_user_asked_for_is_remembered_before_its_progress_lands_and_taken_up_after_a_restart(played):
    ledger = Ledger(played)
    assert run(played, announce=True, tables=[SnapshotTable(*TABLE, where="id <= 10")], filters=ledger) == []
    kinds = [kind for kind, _ in played.events]
    assert kinds.index("remembered") < kinds.index("landed")
    asked = ledger.asked["db.t"]
    played.events.clear()
    resumed = replace(asked, done=(4,))  # (as a restart reads it back from the target)
    assert run(played, tables=[SnapshotTable(*TABLE, progress=resumed)], filters=ledger) == []
    assert played.runner.status()["db.t"].phase == "finished"
    assert [done for kind, done in played.events if kind == "landed"] == [(6,), (8,), (10,)]


def test_a_cancelled_back_fill_lands_its_mark_with_its_own_snapshot_and_condition(played, monkeypatch):
    made = windows_made(monkeypatch)
    earlier = TableProgress("snap", "db.t", (ROWS,), (4,), key=("id",), where="id <= 10")
    assert run(played, cancelled=True, finishes=False, tables=[SnapshotTable(*TABLE, progress=earlier)]) == []
    (mark,) = made
    landed = mark.chunk.progress
    assert landed.finished and (landed.snapshot, landed.where, landed.done) == ("snap", "id <= 10", (ROWS,))


def test_a_cancel_leaves_a_table_to_rebuild_for_the_next_start_to_read(played, monkeypatch):
    # (Its target, made anew at the rebuild's mark, would otherwise keep only what the stream wrote.)
    made = windows_made(monkeypatch)
    played.cancel_at_read = 1  # (while the rebuild's mark is written)
    assert run(played, finishes=False, tables=[SnapshotTable(*TABLE, rebuild=True)]) == []
    assert [w.replaces for w in made] == [True], "the rebuild's mark only: no mark that says the table is done"
    assert [done for kind, done in played.events if kind == "landed"] == [None]
    assert played.runner.status()["db.t"].phase != "cancelled"
