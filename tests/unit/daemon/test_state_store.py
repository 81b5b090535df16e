"""The SQLite state store: transactional, and never silently reset."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import pytest

from canalbridge.daemon.state import STATE_FILE, StateError, StateStore, StoredFilters
from canalbridge.sync.model.position import Ack, EntryPosition
from canalbridge.sync.model.record import ChannelRecord, FailKind, FailMessage, JobRecord, JobState
from canalbridge.sync.snapshot.progress import TableProgress


def snapshot(state=JobState.RUNNING, ack=None, committed=None, fail=None):
    return JobRecord("job1", state, (ChannelRecord("db.t", "lake.db.t", committed),), fail=fail, create_time_ms=1,
                     last_start_time_ms=2, ack=Ack(ack, 5) if ack else None, updated_ms=10)


def test_round_trip_keeps_positions_and_transitions(tmp_path):
    store = StateStore(tmp_path)
    position = EntryPosition("mysql-bin.000002", 77, 1000, "u:1-3")
    store.save_job(snapshot(ack=position, committed=position), transition=True)
    paused = FailMessage(FailKind.RUN_FAIL, "a reason")
    store.save_job(snapshot(state=JobState.PAUSED, fail=paused), transition=True)  # no new position: it stays
    record = StateStore(tmp_path).load_jobs()["job1"]
    assert record.state is JobState.PAUSED and record.ack == Ack(position, 5) and record.fail == paused
    assert record.channels == (ChannelRecord("db.t", "lake.db.t", position),)
    assert [event[1] for event in store.events("job1")] == ["RUNNING", "PAUSED"]


def test_truncated_file_is_an_error(tmp_path):
    store = StateStore(tmp_path)
    store.save_job(snapshot(), transition=True)
    store.close()  # checkpoints the WAL into the file, which is then cut short
    path = tmp_path / STATE_FILE
    data = path.read_bytes()
    path.write_bytes(data[:100])
    for suffix in ("-wal", "-shm"):
        (tmp_path / (STATE_FILE + suffix)).unlink(missing_ok=True)
    with pytest.raises(StateError, match=str(path)):
        StateStore(tmp_path)


def test_foreign_sqlite_file_is_an_error(tmp_path):
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        db.execute("CREATE TABLE something_else (x)")
    with pytest.raises(StateError, match="not a canalbridge state store"):
        StateStore(tmp_path)


def test_missing_store_is_reported_when_not_creating(tmp_path):
    with pytest.raises(StateError, match="no state store here"):
        StateStore(tmp_path, create=False)


def test_a_backfills_condition_is_known_only_as_the_newest_the_user_asked_for_and_outlives_a_restart(tmp_path):
    store = StateStore(tmp_path)
    asked = TableProgress("snap-1", "shop.Orders", (9,), key=("id",), where="id <= 9")
    StoredFilters(store).remember("job", asked)
    store.close()
    filters = StoredFilters(StateStore(tmp_path, create=False))
    assert filters.knows("job", asked)
    assert filters.knows("job", TableProgress("snap-1", "shop.orders", (9,), (5,), ("id",), "id <= 9"))
    assert not filters.knows("job", replace(asked, where="id <= 9) OR (SELECT SLEEP(5)"))
    assert not filters.knows("job", replace(asked, snapshot="snap-0")), "an older back-fill's"
    assert not filters.knows("other", asked)


def test_a_store_made_before_backfills_were_kept_gains_their_table(tmp_path):
    StateStore(tmp_path).close()
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        db.execute("DROP TABLE backfills")
    store = StateStore(tmp_path, create=False)
    assert store.backfill("job", "shop.orders") is None
