"""A DDL's step applied to an Iceberg target: its columns, key and recorded names, in one stamped commit."""

from __future__ import annotations

import json

import structlog

from canalbridge.sync.errors import SchemaChangeError, rebuild_remedy
from canalbridge.sync.model.changes import Alteration
from canalbridge.sync.model.position import Position
from canalbridge.sync.schema.ddl import ChangeKey, RenameTable, SchemaChange, TruncateTable, key_after, renamed
from spark_sink.errors import EvolutionRefused
from spark_sink.evolve import Column, MakeNullable, Operation, plan
from spark_sink.shaping import ShapingRefused
from spark_sink.stamp import position_properties
from spark_sink.table import PROP_COLUMN_ALIASES, PROP_PRIMARY_KEY, PROP_SOURCE_TABLE
from spark_sink.writer import IcebergWriter

log = structlog.get_logger("canalbridge.spark")


class IcebergSchemaApplier:
    """Applies the schema steps of one channel (a :class:`~canalbridge.sync.channel.sink.SchemaApplier`) to the
    table its writer holds, between two of the writer's applies."""

    def __init__(self, writer: IcebergWriter) -> None:
        self._writer = writer
        self._log = log.bind(job=writer.job, channel=writer.channel.source, target=writer.channel.target)

    def alter(self, alteration: Alteration, stamp: Position, label: str) -> None:
        writer, channel = self._writer, self._writer.channel
        assert not writer.holding, "a DDL applied while rows are held on the branch"
        table = writer.live()
        exists = table.columns() is not None
        properties = table.properties() if exists else {}
        writer.shaping.learn(properties)
        try:  # (before the table exists too: renames of masked and excluded columns are followed, and it is
            # made with them)
            changes = writer.shaping.alteration(alteration.changes)
        except ShapingRefused as exc:
            raise SchemaChangeError(alteration.table, alteration.sql, alteration.position, str(exc)) from exc
        if not exists:
            return  # the table is created from the first rows, with their columns
        summary = position_properties(writer.job, label, stamp, snapshot=writer.snapshot_progress)
        if any(isinstance(c, TruncateTable) for c in alteration.changes):
            writer.mode.truncate(summary)
            return
        own = set(writer.mode.own_columns())
        columns = [c for c in table.schema() if c.name not in own]
        key = json.loads(properties.get(PROP_PRIMARY_KEY, "[]"))
        new_key = list(key_after(tuple(key), alteration.changes))
        keys_change = any(isinstance(change, ChangeKey) for change in alteration.changes)
        if keys_change and new_key and channel.source_in_key:  # rows keep their source in the key
            new_key += [c for c in channel.origin_columns if c.lower() not in {k.lower() for k in new_key}]
        try:
            # A key the statement replaces may lose its columns in it (DROP PRIMARY KEY, DROP COLUMN id, ...).
            operations = plan(columns, changes, drop_columns=alteration.drop_columns,
                              key=new_key if keys_change else key, shared=alteration.shared)
        except EvolutionRefused as exc:
            raise SchemaChangeError(alteration.table, alteration.sql, alteration.position,
                                    f"{exc}; {rebuild_remedy(writer.job, channel.source)}") from exc
        table_properties = {PROP_PRIMARY_KEY: json.dumps(new_key)} if new_key != key else {}
        table_properties.update(writer.shaping.record(properties))  # (masked and excluded columns renamed)
        identifier_fields = None  # (renamed with their columns by Iceberg)
        if keys_change:
            identifier_fields = self._key_identifier_fields(new_key, columns, alteration.changes, operations)
        # The channel computed a shared target's aliases (the other shards' rows keep the old names until
        # their own DDL): recorded with the step, read back at the channel's next start.
        if alteration.aliases is not None:
            aliases = dict(alteration.aliases)
            if aliases != json.loads(properties.get(PROP_COLUMN_ALIASES, "{}")):
                table_properties[PROP_COLUMN_ALIASES] = json.dumps(aliases, sort_keys=True)
        for change in alteration.changes:
            if isinstance(change, RenameTable):  # a rename the channel follows: read back at its next start
                table_properties[PROP_SOURCE_TABLE] = f"{change.to.schema}.{change.to.table}"
        table.evolve(operations, summary, table_properties, identifier_fields)
        writer.schema_changed()  # the next commit checks its columns against the new schema
        self._log.info("spark.schema_changed", sql=alteration.sql, operations=[repr(o) for o in operations])

    def _key_identifier_fields(self, key: list[str], columns: list[Column], changes: tuple[SchemaChange, ...],
                               operations: list[Operation]) -> list[str]:
        """Iceberg's identifier fields after the source's primary key became ``key``.

        They must be required columns, and a column Iceberg has as optional cannot become required
        (its old rows may hold nulls): then the table has none, and ``canalbridge.primary-key`` alone
        names the key (the MERGE uses the rows' key either way).
        """
        wanted = self._writer.mode.identifier_fields(key)
        nullable = {o.name.lower() for o in operations if isinstance(o, MakeNullable)}
        required = renamed(tuple(c.name for c in columns if not c.nullable and c.name.lower() not in nullable),
                           changes)
        if all(name.lower() in {r.lower() for r in required} for name in wanted):
            return wanted
        self._log.warning("spark.identifier_fields_dropped", key=key,
                          reason="a key column is optional in Iceberg; canalbridge.primary-key names the key")
        return []
