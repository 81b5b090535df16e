"""An upsert target's columns about each row's last change: ``metadata`` (its operation, source time and binlog
position) and soft deletes (``_is_deleted``, ``_deleted_at``).

They need what an upsert's staged rows do not otherwise carry: each change's
kind and position. A channel that asks for any of them stages those too
(:data:`TRACKED_FIELDS`), in Python as the JVM decoder gives them, and a
snapshot's chunk rows get their chunk's close signal as theirs. After the
last change per key is chosen, :meth:`ChangeColumns.columns` turns them into
the target's columns. With soft deletes, a key's delete becomes a row like
the others (its old image, whole: the channel asks for whole before images),
marked deleted; the upsert then replaces the row in place, and a later
insert of the key replaces it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from canalbridge.sync.model.changes import ChangeKind, ChangeRow
from canalbridge.sync.model.position import Position
from canalbridge.sync.settings import DELETED_AT_COLUMN, DELETED_COLUMN, METADATA_COLUMNS, ChannelSettings
from spark_sink.changelog import SNAPSHOT_OP
from spark_sink.table import TargetColumn

if TYPE_CHECKING:
    from pyspark.sql import Column

# What a staged row carries besides _op and _seq when a target records its changes: named as the JVM decoder's.
TRACKED_FIELDS: tuple[tuple[str, str], ...] = (
    ("_kind", "string"), ("_journal", "string"), ("_offset", "bigint"), ("_execute_time_ms", "bigint"),
)
_OPERATIONS = {ChangeKind.INSERT.value: "insert", ChangeKind.UPDATE_AFTER.value: "update",
               ChangeKind.DELETE.value: "delete", ChangeKind.UPDATE_BEFORE.value: "delete",
               SNAPSHOT_OP: "snapshot"}
_TYPES = {METADATA_COLUMNS["op"]: "string", METADATA_COLUMNS["source_time"]: "timestamp",
          METADATA_COLUMNS["position"]: "string", DELETED_COLUMN: "boolean", DELETED_AT_COLUMN: "timestamp"}


class ChangeColumns:
    """The change columns a channel's upsert target has (none: :attr:`tracked` is False)."""

    def __init__(self, channel: ChannelSettings) -> None:
        self.names = channel.change_columns
        self.soft = channel.soft_deletes
        self.tracked = bool(self.names)
        # The staged fields the change columns are made of, as a frame's columns (none when untracked).
        self.fields: tuple[str, ...] = tuple(name for name, _ in TRACKED_FIELDS) if self.tracked else ()

    def target_columns(self) -> list[TargetColumn]:
        return [TargetColumn(name, _TYPES[name]) for name in self.names]

    @staticmethod
    def staged(row: ChangeRow) -> tuple:
        """A row's :data:`TRACKED_FIELDS`, as the staging holds them."""
        position = row.position
        return row.kind.value, position.journal, position.offset, position.execute_time_ms

    @staticmethod
    def chunk_fields(position: Position) -> list[Column]:
        """:data:`TRACKED_FIELDS` of a snapshot chunk's rows: its close signal's position."""
        from pyspark.sql import functions as F

        return [F.lit(SNAPSHOT_OP).alias("_kind"), F.lit(position.journal).alias("_journal"),
                F.lit(position.offset).cast("bigint").alias("_offset"),
                F.lit(position.execute_time_ms).cast("bigint").alias("_execute_time_ms")]

    def columns(self) -> list[Column]:
        """``_op`` and the change columns, from the last change's :data:`TRACKED_FIELDS` (and ``_op``: "D" for a
        key that is gone, which soft deletes keep as a row marked deleted)."""
        from pyspark.sql import functions as F

        gone = F.col("_op") == F.lit("D")
        operation = F.lit(None).cast("string")
        for kind, word in _OPERATIONS.items():
            operation = F.when(F.col("_kind") == F.lit(kind), F.lit(word)).otherwise(operation)
        at = F.timestamp_millis(F.col("_execute_time_ms"))
        made = {METADATA_COLUMNS["op"]: operation, METADATA_COLUMNS["source_time"]: at,
                METADATA_COLUMNS["position"]: F.concat_ws(":", F.col("_journal"), F.col("_offset").cast("string")),
                DELETED_COLUMN: gone, DELETED_AT_COLUMN: F.when(gone, at)}
        op = F.lit("U").alias("_op") if self.soft else F.col("_op")
        return [op, *[made[name].alias(name) for name in self.names]]
