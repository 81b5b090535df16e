"""What ``canalbridge validate`` checks of a job's snapshot before it runs: the source database answers with the
user's password, the signal table is there and writable, and each table has a key a snapshot can read by."""

from __future__ import annotations

from collections.abc import Sequence

from canalbridge.source_db import SignalTable, SourceDb, SourceDbError, table_key
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.settings import JobSettings


def snapshot_problems(job: JobSettings) -> list[str]:
    """Each problem found, as ``job NAME: ...`` sentences that name the table and what to do (none: ready)."""
    settings = job.snapshot
    if settings is None or not settings.active:
        return []
    try:
        with settings.connect() as db:
            signals = SignalTable(db, *settings.signal)
            signals.check()
            signals.check_writable()
            return [f"job {job.name}: {problem}" for problem in _table_problems(db, job)]
    except SourceDbError as exc:
        return [f"job {job.name}: {exc}"]


def _table_problems(db: SourceDb, job: JobSettings) -> Sequence[str]:
    problems = []
    for channel in job.channels:
        if channel.pattern is not None:
            continue  # (a rule's tables are found when the snapshot starts; one without a key is streamed only)
        try:
            table_key(db, *TableId.parse(channel.source), channel.key)
        except SourceDbError as exc:
            problems.append(str(exc))
    return problems
