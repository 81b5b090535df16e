"""Changelog mode: every change appended as a row, with its kind, binlog position and execute time."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from canalbridge.sync.model.changes import BeforeImages, ChunkBatch, RowBatch
from canalbridge.sync.model.position import EntryPosition, Position
from spark_sink.equality import Staged
from spark_sink.table import TargetColumn
from spark_sink.writer import IcebergWriter, Layout, Transaction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


SNAPSHOT_OP = "+S"  # a row a snapshot read, at its chunk's close signal


class ChangelogMode:
    """The changelog write mode of an :class:`~spark_sink.writer.IcebergWriter`: appends every change as a row,
    with ``_op`` (+I, -U, +U, -D; +S for a row a snapshot read), its binlog position and execute time."""

    meta_fields: tuple[tuple[str, str], ...] = (
        ("_op", "string"), ("_seq", "bigint"), ("_journal", "string"), ("_offset", "bigint"),
        ("_execute_time_ms", "bigint"),
    )
    _OWN = ("_op", "_journal", "_offset", "_execute_time", "_seq")
    layout_note: str | None = None  # (appends rewrite no file)
    filter_deletes = False  # a change the row filter refuses is not recorded

    def __init__(self, writer: IcebergWriter) -> None:
        self.writer = writer

    def prepared(self, batch: Layout) -> None:
        pass

    def before_images(self) -> BeforeImages:
        return BeforeImages.FULL

    def own_columns(self) -> tuple[str, ...]:
        return self._OWN

    def added_columns(self) -> list[TargetColumn]:
        return []  # (a target without them is no changelog: validate refuses it)

    def identifier_fields(self, key_names: list[str]) -> list[str]:
        return []  # a key appears once per change

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        self.writer.live()
        if not (isinstance(after, EntryPosition) and isinstance(through, EntryPosition)):
            return set()  # (only Canal's second pass refills)
        # The range's ends by offset; the files between by name. Names of one length compare as their
        # numbers do, and past .999999 they grow a digit: a file between is longer than the first or
        # shorter than the last. (Python's comparison of the positions decides in the end.)
        if after.journal == through.journal:
            where = "_journal = :first AND _offset > :after AND _offset <= :through"
        else:
            between = ("_journal > :first AND _journal < :last" if len(after.journal) == len(through.journal) else
                       "(length(_journal) = length(:first) AND _journal > :first) "
                       "OR (length(_journal) = length(:last) AND _journal < :last)")
            where = f"(_journal = :first AND _offset > :after) OR (_journal = :last AND _offset <= :through) " \
                    f"OR ({between})"
        rows = self.writer.spark.sql(
            f"SELECT DISTINCT _journal, _offset FROM {self.writer.table.identifier} WHERE {where}",
            args={"first": after.journal, "last": through.journal, "after": after.offset,
                  "through": through.offset},
        ).collect()
        held = {(row["_journal"], int(row["_offset"])) for row in rows}
        return {(journal, offset) for journal, offset in held if after < EntryPosition(journal, offset) <= through}

    def truncate(self, summary: dict[str, str]) -> None:
        # A changelog keeps what happened; a TRUNCATE's rows are not in Canal's stream to record.
        self.writer.log.warning("spark.truncate_not_applied", reason="a changelog target keeps its history")

    def own_target_columns(self) -> list[TargetColumn]:
        return [
            TargetColumn("_op", "string", True), TargetColumn("_journal", "string", True),
            TargetColumn("_offset", "bigint", True), TargetColumn("_execute_time", "timestamp"),
            TargetColumn("_seq", "bigint", True),
        ]

    def stage(self, batch: RowBatch) -> list[tuple]:
        return [
            (row.kind.value, self.writer.next_seq(), row.position.journal, row.position.offset,
             row.position.execute_time_ms, *row.values)
            for row in batch.rows
        ]

    def from_changes(self, changes: DataFrame, batch: Layout) -> DataFrame:
        return changes.withColumnRenamed("_kind", "_op")  # the decoder's kinds are the changelog's _op codes

    def typed(self, staged: DataFrame, batch: Layout) -> DataFrame:
        from pyspark.sql import functions as F

        execute_time = F.timestamp_millis(F.col("_execute_time_ms")).alias("_execute_time")
        unfilled = [F.lit(None).cast(c.spark_type).alias(c.name) for c in self.writer.unmapped]  # NULL in new rows
        return staged.select(
            *self.writer.converted(batch), *unfilled, F.col("_op"), F.col("_journal"), F.col("_offset"), execute_time,
            F.col("_seq"),
        )

    def with_chunks(self, staged: DataFrame | None, batch: Layout, chunks: list[tuple[int, ChunkBatch]]
                    ) -> DataFrame:
        """The staged changes and each chunk's rows (:meth:`IcebergWriter.chunk_rows`) as ``+S`` rows at the
        chunk's close signal: a snapshot row, not a change, so that the table holds each source change once. A key the
        window noted has no ``+S`` row; its changes in the stream stand."""
        from pyspark.sql import functions as F

        frames = [] if staged is None else [self.typed(staged, batch)]
        names = [F.col(f"c{index}").alias(name) for index, name in enumerate(batch.target_columns)]
        unfilled = [F.lit(None).cast(c.spark_type).alias(c.name) for c in self.writer.unmapped]
        for seq, chunk in chunks:
            position = chunk.position  # (a binlog position, or a Kafka one: both name a journal and an offset)
            frames.append(self.writer.chunk_rows(chunk, batch).select(
                *names, *unfilled, F.lit(SNAPSHOT_OP).alias("_op"), F.lit(position.journal).alias("_journal"),
                F.lit(position.offset).cast("bigint").alias("_offset"),
                F.timestamp_millis(F.lit(position.execute_time_ms)).alias("_execute_time"),
                F.lit(seq).cast("bigint").alias("_seq")))
        return functools.reduce(lambda one, other: one.unionByName(other), frames)

    def write(self, frame: DataFrame, txn: Transaction, properties: dict[str, str], publish: bool) -> None:
        def append(target: str) -> None:
            writer = frame.writeTo(target)
            for key, value in properties.items():
                writer = writer.option(f"snapshot-property.{key}", value)
            writer.append()

        if publish and not self.writer.holding:
            append(self.writer.table.identifier)  # one snapshot: straight onto main
        else:
            self.writer.held_write(append, publish)

    def stage_write(self, frame: DataFrame, txn: Transaction, properties: dict[str, str]) -> Staged | None:
        self.writer.log.warning("spark.applied_alone", reason="a changelog target's appends are not staged")
        self.write(frame, txn, properties, True)
        return None
