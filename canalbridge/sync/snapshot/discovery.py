"""The tables a job's rules take that the source already holds when its snapshot starts.

A rule's channels open as the stream meets their tables, so the tables
whose rows were written before the stream began are found in the source
instead: ``information_schema``, each table resolved as the stream would
resolve it (:class:`~canalbridge.sync.routing.rules.Routes`: a channel named for
the table wins, then the first rule that matches). Tables created later
need no snapshot: every row of theirs comes after their CREATE, in the
stream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from canalbridge.source_db import SourceDb, TableKeyError, table_key
from canalbridge.sync.errors import RouteConflictError, SnapshotError
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.routing.rules import Routes
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.snapshot.progress import TableProgress
from canalbridge.sync.snapshot.runner import SnapshotTable

# Schemas of the server itself: no rule's tables live there.
_SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")


@dataclass(frozen=True)
class RoutedTable:
    """A source table and the channel the stream routes it to (for a table a rule takes: the one the rule makes
    for it)."""

    schema: str
    table: str
    channel: ChannelSettings

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @classmethod
    def of(cls, channel: ChannelSettings) -> RoutedTable:
        """The table of a channel named for one."""
        return cls(*TableId.parse(channel.source), channel)


def rule_tables(db: SourceDb, settings: JobSettings) -> list[RoutedTable]:
    """The base tables of the source that ``settings``' rules take, as ``information_schema`` spells them (and so
    as a snapshot's windows name them); the signal table is never one. Only tables the snapshot's user may see
    are listed: it needs SELECT on them anyway."""
    if not settings.has_rules:
        return []
    marks = ", ".join(["%s"] * len(_SYSTEM))
    # (MariaDB's system-versioned tables are tables too; views are not.)
    rows = db.query(f"SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE IN "
                    f"('BASE TABLE', 'SYSTEM VERSIONED') AND TABLE_SCHEMA NOT IN ({marks}) "
                    f"ORDER BY TABLE_SCHEMA, TABLE_NAME", _SYSTEM)
    signal = tuple(part.lower() for part in settings.snapshot.signal) if settings.snapshot is not None else None
    routes = Routes(settings.name, settings.channels)  # (its own: resolving records the targets it met)
    found = []
    for schema, table in rows:
        if (str(schema).lower(), str(table).lower()) == signal:
            continue
        try:
            channel = routes.resolve(str(schema), str(table))
        except RouteConflictError as exc:  # as the stream would, once it met the table
            raise SnapshotError(f"{schema}.{table}", str(exc)) from exc
        if channel is not None and channel.rule is not None:
            found.append(RoutedTable(str(schema), str(table), channel))
    return found


def unfinished(found: Sequence[RoutedTable],
               progress: Callable[[str], Mapping[str, TableProgress]]) -> list[SnapshotTable]:
    """Those of ``found`` whose targets do not hold a finished snapshot of them (``progress``: what a target's
    newest commit of the job says of each source table, read once per target: a merged one holds several
    tables'), with the progress they hold."""
    tables, targets = [], dict[str, Mapping[str, TableProgress]]()
    for each in found:
        target = each.channel.target
        if target not in targets:
            targets[target] = progress(target)
        done = targets[target].get(each.name)
        if done is None or not done.finished:
            tables.append(SnapshotTable(each.schema, each.table, each.channel.key, done, channel=each.channel))
    return tables


def keyed(db: SourceDb, tables: Sequence[SnapshotTable]) -> tuple[list[SnapshotTable], list[tuple[str, str]]]:
    """Those of ``tables`` a snapshot can cut into key ranges, and (name, why) of each other one: a rule's table
    without a usable key streams as it always did, so it is left out rather than refused."""
    cut, left = [], []
    for table in tables:
        try:
            table_key(db, table.schema, table.table, table.key)
        except TableKeyError as exc:
            left.append((table.name, exc.reason))
            continue
        cut.append(table)
    return cut, left
