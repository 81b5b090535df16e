"""What a channel knows of its target's columns while it stages, and what each DDL does to them.

A channel maps each source table's rows on their own (shards of a merged
target may be on either side of an ALTER), onto the target's columns as
the DDLs staged so far leave them. A DDL that changes the columns (or a
TRUNCATE, or a followed RENAME, that the job applies) becomes an
:class:`~canalbridge.sync.model.changes.Alteration`: a step the committer
applies between the rows before and after it.

On a merged channel the step is the shared target's: applied where it
still changes something (the first shard's ALTER adds the column, the
others find it there), with dropped columns kept (other shards still have
them), and TRUNCATE never applied (it empties one shard). A column one
shard renamed keeps taking the other shards' rows under its old name
(an alias) until their own DDL.

Thread-free and free of I/O: the channel reads the target's columns at
start, and the staging thread again before the first entry after an abort
or a failed send, and hands them in with :meth:`TargetSchema.reset`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import structlog

from canalbridge.sync.errors import SchemaChangeError
from canalbridge.sync.model.changes import Alteration, BeforeImages
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.schema.ddl import (
    ChangeKey,
    RenameTable,
    SchemaChange,
    TableName,
    TruncateTable,
    changes_columns,
    column_aliases,
    columns_after,
    parse_ddl,
)
from canalbridge.sync.schema.rows import ColumnsHistory, RowMapper
from canalbridge.sync.settings import ChannelSettings, SchemaSettings


class TargetSchema:
    """A channel's source tables mapped onto its target's columns. Owned by the channel's staging thread."""

    def __init__(self, settings: ChannelSettings, schema: SchemaSettings, before_images: BeforeImages,
                 log: structlog.typing.FilteringBoundLogger) -> None:
        self.settings = settings
        self.schema = schema
        self._before_images = before_images
        self._log = log
        self._mappers: dict[TableId, RowMapper] = {}  # by source table: shards map on their own
        self._target_columns: tuple[str, ...] | None = None  # the target's, as the DDLs staged so far leave it
        self._aliases: dict[str, str] = {}  # a shared target's: source names another shard's rename took

    def reset(self, target_columns: Sequence[str] | None, aliases: Mapping[str, str]) -> None:
        """Start again from the target as it is: what the mappers learnt from dropped entries goes (the
        replay starts where the target stands, which may be before a DDL they had taken in)."""
        self._mappers.clear()
        self._target_columns = tuple(target_columns) if target_columns is not None else None
        self._aliases = dict(aliases)

    def mapper(self, table: TableId) -> RowMapper:
        """The mapper of one source table (one for a channel of one table), knowing the target as it is now."""
        mapper = self._mappers.get(table)
        if mapper is None:
            settings = self.settings
            schema, name = table
            origin = tuple((column, value) for column, value in ((settings.schema_column, schema),
                                                                  (settings.table_column, name)) if column)
            mapper = self._mappers[table] = RowMapper(
                f"{schema}.{name}", settings.columns or self._target_columns, settings.key,
                before_images=self._before_images, by_name=settings.columns is None, origin=origin,
                origin_in_key=settings.source_in_key, aliases=self._aliases)
        return mapper

    def created(self, target_columns: tuple[str, ...]) -> None:
        """Rows were sent with these target columns: a target the writer creates from them has them."""
        if self._target_columns is None and self.settings.columns is None:
            self._target_columns = target_columns

    def histories(self) -> tuple[ColumnsHistory, ...]:
        """What each source table's rows and DDLs were so far, for naming a row that no longer fits."""
        return tuple(mapper.history() for mapper in self._mappers.values())

    def ddl(self, sql: str, position: Position, table: TableId) -> Alteration | None:
        """A DDL on one of the channel's tables (already mapped by its mapper): the step it makes, if any."""
        mapper = self.mapper(table)
        ddl = parse_ddl(sql)
        schema, name = table
        if not ddl.understood:
            assert ddl.not_understood is not None
            mapper.unread_ddl(ddl.not_understood)
            self._log.warning("channel.ddl_not_understood", sql=sql, position=str(position),
                              reason=ddl.not_understood, note="the next row must keep the columns as they were")
            return None
        shared = self.settings.merged
        follows = self.schema.follows_renames and self.settings.rule is None and not shared
        # A rename is applied (recorded in the target) only where the channel follows it; its new name takes
        # the session's schema, as MySQL reads it.
        changes = tuple(RenameTable(TableName(c.to.schema or schema, c.to.table)) if isinstance(c, RenameTable)
                        else c for c in ddl.changes_for(schema, name) if follows or not isinstance(c, RenameTable))
        if any(isinstance(c, ChangeKey) for c in changes):
            if self.settings.key is not None:
                # Rows are keyed by the configured key: the source's new key only changes their key flags.
                mapper.alter(Alteration(f"{schema}.{name}", sql, (), position))
                changes = tuple(c for c in changes if not isinstance(c, ChangeKey))
                self._log.info("channel.source_key_changed", sql=sql, position=str(position),
                               key=list(self.settings.key), note="the channel keeps its configured key")
            elif shared:
                raise SchemaChangeError(f"{schema}.{name}", sql, position,
                                        "the primary key of one shard of a merged target changed, and the target's "
                                        "key is every shard's: set key for the channel (the columns that identify a "
                                        "row in every shard) and resume")
        applied: tuple[SchemaChange, ...] = tuple(
            c for c in changes
            if (isinstance(c, TruncateTable) and self.schema.applies_truncate and not shared)
            or isinstance(c, RenameTable))
        if changes_columns(changes):
            if self.settings.columns is None:
                applied = changes
            else:
                # The target's names are the list's, not the source's: the next row is checked against
                # the list (and the job pauses, naming this DDL, if it no longer fits).
                self._log.warning("channel.ddl_not_applied", sql=sql, position=str(position),
                                  reason="the channel maps columns by an explicit list")
                return None
        if not applied:
            self._log.info("channel.ddl_skipped", sql=sql, position=str(position), table=f"{schema}.{name}",
                           changes=[type(c).__name__ for c in changes] or "none to the columns")
            return None
        drop = self.schema.drop_columns and not shared
        # The target's columns as the DDLs staged so far leave them, where the channel knows them (not while
        # the writer is still to create the target, nor for a channel that maps by an explicit list).
        columns = self._target_columns if self.settings.columns is None else None
        aliases = None
        if columns is not None and shared:
            # The other shards' rows keep a renamed column's old name until their own DDL.
            self._aliases = column_aliases(self._aliases, columns, applied)
            aliases = tuple(sorted(self._aliases.items()))
        alteration = Alteration(f"{schema}.{name}", sql, applied, position, drop, shared=shared, aliases=aliases)
        mapper.alter(alteration)
        if columns is not None:
            self._target_columns = columns_after(columns, applied, drop=drop)
            for other in self._mappers.values():
                if other is not mapper:
                    other.retarget(self._target_columns, self._aliases)
        return alteration
