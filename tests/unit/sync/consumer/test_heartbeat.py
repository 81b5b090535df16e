"""The heartbeat writer: a row in the signal table when the Consumer asks, and an outage logged once, never
raised."""

from __future__ import annotations

import threading
from typing import Any

import structlog.testing

from canalbridge.source_db import SourceDbConnectionError
from canalbridge.sync.consumer.heartbeat import Heartbeat
from canalbridge.sync.model.tables import TableId
from tests.helpers import eventually


class FakeDb:
    """Records each statement; ``down`` makes every query fail as a lost server does."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, tuple[Any, ...]]] = []
        self.down = False
        self.closed = 0

    def query(self, sql: str, params: Any = (), *, table: str | None = None) -> list[tuple[Any, ...]]:
        if self.down:
            raise SourceDbConnectionError("lost", address="db:3306", table=table)
        self.statements.append((sql, tuple(params)))
        return []

    def close(self) -> None:
        self.closed += 1


def started(db: FakeDb) -> tuple[Heartbeat, threading.Event]:
    stop = threading.Event()
    heartbeat = Heartbeat("job1", lambda: db, TableId("shop", "canalbridge_signal"), stop)  # type: ignore[arg-type]
    heartbeat.start()
    return heartbeat, stop


def test_a_request_writes_the_jobs_heartbeat_row_into_the_signal_table():
    db = FakeDb()
    heartbeat, stop = started(db)
    try:
        heartbeat.request()
        assert eventually(lambda: heartbeat.written == 1, 5)
    finally:
        stop.set()
        assert heartbeat.join(5)
    sql, params = db.statements[0]
    assert sql.startswith("REPLACE INTO `shop`.`canalbridge_signal` (id, kind, data)")
    assert params[:2] == ("heartbeat:job1", "heartbeat")


def test_a_source_that_is_down_is_logged_once_and_written_to_again_once_back():
    db = FakeDb()
    db.down = True
    with structlog.testing.capture_logs() as logs:
        heartbeat, stop = started(db)
        try:
            heartbeat.request()
            assert eventually(lambda: db.closed == 1, 5)  # the failed connection is dropped, nothing raised
            heartbeat.request()
            assert eventually(lambda: db.closed == 2, 5)  # failed again: not logged again
            db.down = False
            heartbeat.request()
            assert eventually(lambda: heartbeat.written == 1, 5)
        finally:
            stop.set()
            assert heartbeat.join(5)
    # (Only warnings: the run's log level may be set above info by then.)
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == ["heartbeat.failed"]
