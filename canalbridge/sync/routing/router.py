"""Which open channel takes a table's entries, and the name each followed table goes by now.

:class:`TableRouter` turns the job's routes (:mod:`canalbridge.sync.routing.rules`)
into channels as the Consumer meets tables: a table a rule takes opens its
channel with its first entry, and shards of a merged target share one.
With ``schema.rename_table = "follow"``, a RENAME TABLE moves a channel to
its table's new name; the old name is then another table's, which no
channel takes.

The router is the one owner of a followed table's current name: the name
its target recorded (read when the channel started), then each rename it
routed once the commit that carries it lands. A rename routed in a
transaction that is aborted is forgotten and read again in the replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.routing.rules import Routes
from canalbridge.sync.schema.ddl import DropTable, RenameTable, parse_ddl
from canalbridge.sync.settings import ChannelSettings, JobSettings

RENAME = int(entry_pb.EventType.RENAME)  # RENAME TABLE, and ALTER TABLE ... RENAME TO (Canal names the new table)
ERASE = int(entry_pb.EventType.ERASE)  # DROP TABLE


def renamed_tables(entry: entry_pb.Entry) -> list[tuple[TableId, TableId]]:
    """Each table a RENAME entry renames: (old, new), a name without a schema taken as the session's (as MySQL
    reads it)."""
    session = entry.header.schemaName
    return [(old.resolved(session), change.to.resolved(session))
            for old, change in parse_ddl(entry_pb.RowChange.FromString(entry.storeValue).sql).changes
            if isinstance(change, RenameTable)]


def dropped_tables(entry: entry_pb.Entry) -> list[TableId]:
    """Each table a DROP TABLE entry drops (a name without a schema: the session's)."""
    session = entry.header.schemaName
    return [table.resolved(session)
            for table, change in parse_ddl(entry_pb.RowChange.FromString(entry.storeValue).sql).changes
            if isinstance(change, DropTable)]


class TableRouter:
    """Routes (schema, table) to a channel, opening those rules make. Used by the Consumer thread only."""

    def __init__(self, settings: JobSettings, channels: Sequence[Channel],
                 open_channel: Callable[[ChannelSettings], Channel] | None,
                 on_open: Callable[[Channel], None], log: structlog.typing.FilteringBoundLogger) -> None:
        self.channels = {channel.source: channel for channel in channels}  # every channel this run opened
        self._routes = Routes(settings.name, settings.channels)
        self._open_channel = open_channel  # starts a channel for a table a rule takes
        self._on_open = on_open  # what the Consumer does with a channel opened mid-transaction
        self._follows_renames = settings.schema.follows_renames
        self._log = log
        self._label = ""  # the open transaction's
        self._by_table: dict[TableId, Channel | None] = {}  # what each table met in this transaction goes to
        # A followed table's name ("schema.table", case-folded), by channel: as its last landed commit left it.
        self._names = {channel.source: channel.source_table.lower() for channel in channels
                       if channel.source_table is not None}
        self._renamed: dict[str, dict[str, str]] = {}  # by label: the renames routed in that transaction

    def begin(self, label: str) -> None:
        """A transaction begins on every channel (and on each one opened while it is open)."""
        self._label = label
        for channel in self.channels.values():
            channel.begin(label)

    def channel_for(self, table: TableId) -> Channel | None:
        """The channel that takes ``table``'s entries: for a table a rule takes, opened when first met."""
        try:
            return self._by_table[table]
        except KeyError:
            pass
        full = table.qualified.lower()
        followed = next((source for source, current in self._names.items() if current == full), None)
        if followed is not None:
            channel: Channel | None = self.channels[followed]
        else:
            channel = self._resolve(table)
        self._by_table[table] = channel
        return channel

    def _resolve(self, table: TableId) -> Channel | None:
        settings = self._routes.resolve(table.schema, table.table)
        if settings is None:
            return None
        if settings.source in self._names:
            return None  # its table was renamed away: the name is another table's now
        channel = self.channels.get(settings.source)
        if channel is None:
            if self._open_channel is None:
                raise AssertionError(f"no channel for {settings.source} and no way to open one")
            # Its committed position is read first: entries it holds are skipped from the first.
            channel = self._open_channel(settings)
            self.channels[channel.source] = channel
            self._on_open(channel)
            channel.begin(self._label)
            self._log.info("consumer.table_picked_up", table=table.qualified, channel=channel.source,
                           target=settings.target, rule=settings.rule, committed=str(channel.committed_position))
        elif settings.merged:
            self._log.info("consumer.shard_joined", table=table.qualified, channel=channel.source)
        return channel

    def ddl_owners(self, entry: entry_pb.Entry, event_type: int, channel: Channel | None, table: TableId,
                   ) -> list[tuple[Channel | None, TableId]]:
        """Who gets a DDL entry (``event_type`` its header's) of ``table``, and under which name: ``channel``,
        or for a RENAME TABLE the job follows, the channel of each renamed table, under its old name."""
        if not self._follows_renames or event_type != RENAME:
            return [(channel, table)]
        return self._follow(entry) or [(channel, table)]

    def _follow(self, entry: entry_pb.Entry) -> list[tuple[Channel | None, TableId]]:
        """Each renamed table a channel is named for goes on under its new name in that channel."""
        followed: list[tuple[Channel | None, TableId]] = []
        for old_table, new_table in renamed_tables(entry):
            channel = self.channel_for(old_table)
            if channel is None or channel.settings.pattern is not None or channel.settings.rule is not None:
                continue  # (a rule's table renamed within the rule is a table of its own)
            self._by_table[old_table] = None
            self._by_table[new_table] = channel
            self._renamed.setdefault(self._label, {})[channel.source] = new_table.qualified.lower()
            followed.append((channel, old_table))
            self._log.info("consumer.rename_followed", channel=channel.source, old=old_table.qualified,
                           new=new_table.qualified)
        return followed

    def committed(self, label: str, failed: set[str]) -> None:
        """The commit of transaction ``label`` landed, except on the channels ``failed``: the renames it
        carries on the others are the tables' names now (a failed one's is read again in the replay)."""
        for source, name in self._renamed.pop(label, {}).items():
            if source not in failed:
                self._names[source] = name

    def aborted(self) -> None:
        """The open transaction was dropped: what it routed is routed again in the replay."""
        self._by_table.clear()
        self._renamed.clear()
