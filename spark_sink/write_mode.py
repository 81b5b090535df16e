"""A write mode: what differs between an upsert target and a changelog target, behind one writer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from canalbridge.sync.model.changes import BeforeImages, ChunkBatch, RowBatch
from canalbridge.sync.model.position import Position
from spark_sink.equality import Staged
from spark_sink.staging import Layout, Transaction
from spark_sink.table import TargetColumn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class WriteMode(Protocol):
    """What differs between upsert and changelog targets: an :class:`~spark_sink.writer.IcebergWriter` holds one
    (:mod:`spark_sink.upsert`, :mod:`spark_sink.changelog`), made for it, and the mode acts through the writer's
    table and session."""

    meta_fields: tuple[tuple[str, str], ...]  # what a staged row carries before its values (``_op``, ``_seq``...)
    layout_note: str | None  # why this target's commits slow down as it grows, once prepared (status shows it)
    filter_deletes: bool  # a row the channel's row_filter refuses: a delete of its key (True), or no change

    def before_images(self) -> BeforeImages:
        """Which before images the mode needs from the row mapper."""
        ...

    def own_columns(self) -> tuple[str, ...]:
        """Columns this mode adds to the mapped ones (the changelog's ``_op``, ...)."""
        ...

    def own_target_columns(self) -> list[TargetColumn]:
        """The columns of :meth:`own_columns` as a new table gets them."""
        ...

    def added_columns(self) -> list[TargetColumn]:
        """Columns of :meth:`own_target_columns` a target made without them is given (NULL in its rows)."""
        ...

    def identifier_fields(self, key_names: list[str]) -> list[str]:
        """Iceberg's identifier fields for a table keyed by ``key_names``."""
        ...

    def prepared(self, batch: Layout) -> None:
        """The writer checked the table for ``batch``'s columns: the mode's own checks of it."""
        ...

    def truncate(self, summary: dict[str, str]) -> None:
        """A source's TRUNCATE TABLE (``job.schema.truncate = "apply"``), stamped with ``summary``."""
        ...

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        """(binlog file, offset) of every change the target's rows hold in ``(after, through]``."""
        ...

    def stage(self, batch: RowBatch) -> list[tuple]:
        """A batch's rows as the staging holds them: :attr:`meta_fields`, then the values."""
        ...

    def from_changes(self, changes: DataFrame, batch: Layout) -> DataFrame:
        """The JVM decoder's change rows as the rows :meth:`stage` would have staged."""
        ...

    def typed(self, staged: DataFrame, batch: Layout) -> DataFrame:
        """The staged rows converted to the target's types, as the mode writes them."""
        ...

    def with_chunks(self, staged: DataFrame | None, batch: Layout,
                    chunks: list[tuple[int, ChunkBatch]]) -> DataFrame:
        """:meth:`typed` of the staged rows (None: there are none) with snapshot chunks among them, each at
        its ``_seq``."""
        ...

    def write(self, frame: DataFrame, txn: Transaction, properties: dict[str, str], publish: bool) -> None:
        """Write ``frame`` stamped with ``properties``: to main at once, or held
        (:meth:`~spark_sink.writer.IcebergWriter.held_write`)."""
        ...

    def stage_write(self, frame: DataFrame, txn: Transaction, properties: dict[str, str]) -> Staged | None:
        """Write ``frame`` stamped with ``properties`` as a staged commit that main does not point at yet
        (:mod:`spark_sink.catalog_commit` publishes it); or, if this write cannot be staged, write it to main
        at once, say why in the log, and return None."""
        ...
