"""The state store: SQLite in ``state_dir``, written transactionally.

It records each job's state transitions (with times and the fail message),
its ack position and time, and each channel's committed position. The
committed positions are a cache of what the Iceberg snapshots hold; at
start the snapshots win. A file that is not a canalbridge state store, or
is damaged, is an error: it is never silently reset.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from canalbridge.sync.model.position import Ack, Position, position_from_dict
from canalbridge.sync.model.record import ChannelRecord, FailKind, FailMessage, JobRecord, JobState
from canalbridge.sync.snapshot.progress import TableProgress

SCHEMA_VERSION = 1
APPLICATION = "canalbridge"
STATE_FILE = "state.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    name TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    fail_kind TEXT, fail_text TEXT,
    create_time_ms INTEGER, last_start_time_ms INTEGER, last_stop_time_ms INTEGER, finish_time_ms INTEGER,
    ack_position TEXT, ack_time_ms INTEGER, last_commit_time_ms INTEGER,
    updated_ms INTEGER
);
CREATE TABLE IF NOT EXISTS job_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL, time_ms INTEGER NOT NULL,
    state TEXT NOT NULL, fail_kind TEXT, fail_text TEXT
);
CREATE TABLE IF NOT EXISTS channels (
    job TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, committed_position TEXT,
    PRIMARY KEY (job, source)
);
""" + """
CREATE TABLE IF NOT EXISTS backfills (
    job TEXT NOT NULL, source TEXT NOT NULL, snapshot TEXT NOT NULL, condition TEXT NOT NULL,
    PRIMARY KEY (job, source)
);
"""
# Added to stores of the same schema version when they open (an older canalbridge leaves it alone).
_BACKFILLS = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS backfills"):]


class StateError(Exception):
    """The state store cannot be used: names the file and why."""


def position_to_json(position: Position | None) -> str | None:
    return None if position is None else json.dumps(position.to_dict())


def position_from_json(text: str | None) -> Position | None:
    return position_from_dict(json.loads(text)) if text else None


class StateStore:
    """One SQLite file; safe to use from several threads."""

    def __init__(self, state_dir: Path, *, create: bool = True) -> None:
        self.path = state_dir / STATE_FILE
        if not create and not self.path.exists():
            raise StateError(f"{self.path}: no state store here (has the daemon ever run with this state_dir?)")
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._check_or_create()
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path}: not a usable canalbridge state store: {exc}") from exc
        except OSError as exc:
            raise StateError(f"{self.path}: cannot open the state store: {exc}") from exc
        self._lock = threading.Lock()

    def _check_or_create(self) -> None:
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executescript(_SCHEMA)
                self._db.execute("INSERT INTO meta VALUES ('application', ?), ('schema_version', ?)",
                                 (APPLICATION, str(SCHEMA_VERSION)))
            return
        if "meta" not in tables:
            raise StateError(f"{self.path}: this SQLite file is not a canalbridge state store (tables: "
                             f"{', '.join(sorted(tables))})")
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("application") != APPLICATION:
            raise StateError(f"{self.path}: this SQLite file belongs to {meta.get('application')!r}, not canalbridge")
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise StateError(f"{self.path}: state schema version {meta.get('schema_version')} is not "
                             f"{SCHEMA_VERSION}; this canalbridge cannot read it")
        result = self._db.execute("PRAGMA quick_check").fetchone()[0]
        if result != "ok":
            raise StateError(f"{self.path}: the state store is damaged ({result})")
        self._db.executescript(_BACKFILLS)

    def close(self) -> None:
        self._db.close()

    # -- writes ---------------------------------------------------------------------------

    def forget_positions(self, job: str, sources: Sequence[str]) -> None:
        """``canalbridge reset``: forget the job's ack and the committed positions of its channels ``sources``,
        which :meth:`save_job` never clears."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("UPDATE jobs SET ack_position = NULL, ack_time_ms = NULL WHERE name = ?", (job,))
                self._db.executemany("UPDATE channels SET committed_position = NULL WHERE job = ? AND source = ?",
                                     [(job, source) for source in sources])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def remember_backfill(self, job: str, source: str, snapshot: str, condition: str) -> None:
        """The back-fill of ``source`` with ``condition`` a user asked ``job`` for (the newest per table)."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO backfills VALUES (?, ?, ?, ?)",
                             (job, source.lower(), snapshot, condition))

    def backfill(self, job: str, source: str) -> tuple[str, str] | None:
        """The newest back-fill of ``source`` asked of ``job``: its snapshot and condition."""
        with self._lock:
            row = self._db.execute("SELECT snapshot, condition FROM backfills WHERE job = ? AND source = ?",
                                   (job, source.lower())).fetchone()
        return None if row is None else (row[0], row[1])

    def save_job(self, record: JobRecord, *, transition: bool) -> None:
        """Write a job's row and its channels in one transaction; log a transition event if asked."""
        fail_kind = record.fail.kind.value if record.fail else None
        fail_text = record.fail.text if record.fail else None
        row = {
            "name": record.name, "state": record.state.value, "fail_kind": fail_kind, "fail_text": fail_text,
            "create_time_ms": record.create_time_ms, "last_start_time_ms": record.last_start_time_ms,
            "last_stop_time_ms": record.last_stop_time_ms, "finish_time_ms": record.finish_time_ms,
            "ack_position": position_to_json(record.ack.position if record.ack else None),
            "ack_time_ms": record.ack.time_ms if record.ack else None,
            "last_commit_time_ms": record.last_commit_time_ms, "updated_ms": record.updated_ms,
        }
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(
                    """INSERT INTO jobs (name, state, fail_kind, fail_text, create_time_ms, last_start_time_ms,
                           last_stop_time_ms, finish_time_ms, ack_position, ack_time_ms, last_commit_time_ms,
                           updated_ms)
                       VALUES (:name, :state, :fail_kind, :fail_text, :create_time_ms, :last_start_time_ms,
                           :last_stop_time_ms, :finish_time_ms, :ack_position, :ack_time_ms, :last_commit_time_ms,
                           :updated_ms)
                       ON CONFLICT(name) DO UPDATE SET state=excluded.state, fail_kind=excluded.fail_kind,
                           fail_text=excluded.fail_text, create_time_ms=excluded.create_time_ms,
                           last_start_time_ms=excluded.last_start_time_ms,
                           last_stop_time_ms=excluded.last_stop_time_ms, finish_time_ms=excluded.finish_time_ms,
                           ack_position=COALESCE(excluded.ack_position, jobs.ack_position),
                           ack_time_ms=COALESCE(excluded.ack_time_ms, jobs.ack_time_ms),
                           last_commit_time_ms=COALESCE(excluded.last_commit_time_ms, jobs.last_commit_time_ms),
                           updated_ms=excluded.updated_ms""",
                    row,
                )
                for channel in record.channels:
                    self._db.execute(
                        """INSERT INTO channels VALUES (?, ?, ?, ?) ON CONFLICT(job, source) DO UPDATE SET
                           target=excluded.target,
                           committed_position=COALESCE(excluded.committed_position, channels.committed_position)""",
                        (record.name, channel.source, channel.target, position_to_json(channel.committed)),
                    )
                if transition:
                    self._db.execute(
                        "INSERT INTO job_events (job, time_ms, state, fail_kind, fail_text) VALUES (?, ?, ?, ?, ?)",
                        (record.name, record.updated_ms, record.state.value, fail_kind, fail_text),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # -- reads ------------------------------------------------------------------------------

    def load_jobs(self) -> dict[str, JobRecord]:
        with self._lock:
            channels: dict[str, list[ChannelRecord]] = {}
            for job, source, target, position in self._db.execute("SELECT * FROM channels ORDER BY job, source"):
                channels.setdefault(job, []).append(ChannelRecord(source, target, position_from_json(position)))
            records = {}
            for row in self._db.execute(
                "SELECT name, state, fail_kind, fail_text, create_time_ms, last_start_time_ms, last_stop_time_ms, "
                "finish_time_ms, ack_position, ack_time_ms, last_commit_time_ms, updated_ms FROM jobs"
            ):
                ack_position = position_from_json(row[8])
                records[row[0]] = JobRecord(
                    name=row[0], state=JobState(row[1]), channels=tuple(channels.get(row[0], ())),
                    fail=FailMessage(FailKind(row[2]), row[3] or "") if row[2] else None,
                    create_time_ms=row[4], last_start_time_ms=row[5], last_stop_time_ms=row[6],
                    finish_time_ms=row[7],
                    ack=Ack(ack_position, row[9] or 0) if ack_position is not None else None,
                    last_commit_time_ms=row[10], updated_ms=row[11],
                )
            return records

    def events(self, job: str) -> list[tuple[int, str, str | None, str | None]]:
        with self._lock:
            return list(self._db.execute(
                "SELECT time_ms, state, fail_kind, fail_text FROM job_events WHERE job = ? ORDER BY id", (job,)
            ))


class StoredFilters:
    """A snapshot's :class:`~canalbridge.sync.snapshot.source.FilterLedger` in the state store: a back-fill's
    condition read back from a target runs only if it is the one the user asked for last."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def remember(self, job: str, progress: TableProgress) -> None:
        assert progress.where is not None
        self._store.remember_backfill(job, progress.table, progress.snapshot, progress.where)

    def knows(self, job: str, progress: TableProgress) -> bool:
        return self._store.backfill(job, progress.table) == (progress.snapshot, progress.where)
