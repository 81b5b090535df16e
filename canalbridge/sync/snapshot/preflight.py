"""What ``canalbridge validate`` checks of a job's snapshot before it runs: the source database answers with the
user's password, its binlog is what the snapshot rests on, the signal table is there and writable, and each table
has a key a snapshot can read by."""

from __future__ import annotations

from collections.abc import Sequence

from canalbridge.source_db import SignalTable, SourceDb, SourceDbError, table_key
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.settings import JobSettings

# The binlog settings a snapshot's watermarks rest on: whole row images in row events (a window notes each changed
# key), and commits in binlog order (a read that starts after a signal sees every transaction before it). MariaDB
# has no binlog_order_commits: it always commits in binlog order.
BINLOG_NEEDS = {"binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_order_commits": "ON"}


def snapshot_problems(job: JobSettings) -> list[str]:
    """Each problem found, as ``job NAME: ...`` sentences that name the table and what to do (none: ready)."""
    settings = job.snapshot
    if settings is None or not settings.active:
        return []
    try:
        with settings.connect() as db:
            problems = _binlog_problems(db)
            signals = SignalTable(db, *settings.signal)
            signals.check()
            signals.check_writable()
            return [f"job {job.name}: {problem}" for problem in [*problems, *_table_problems(db, job)]]
    except SourceDbError as exc:
        return [f"job {job.name}: {exc}"]


def _binlog_problems(db: SourceDb) -> list[str]:
    names = ", ".join(f"'{name}'" for name in BINLOG_NEEDS)
    found = {str(name).lower(): str(value) for name, value in
             db.query(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")}
    return [f"the source's {name} is {found[name]}: a snapshot needs {wanted} (docs/guide/snapshot.md#source)"
            for name, wanted in BINLOG_NEEDS.items() if name in found and found[name].upper() != wanted]


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
