"""Upsert mode: the target kept equal to the source, the last change per key applied in one atomic step."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import structlog

from canalbridge.sync.changes import BeforeImages, ChunkBatch, RowBatch
from canalbridge.sync.errors import TargetKeyMismatchError
from spark_sink.commit_properties import with_commit_properties
from spark_sink.decode import removes
from spark_sink.identifiers import quote
from spark_sink.session import release_checkpoint
from spark_sink.table import PROP_PRIMARY_KEY, slow_layout_note
from spark_sink.types import convert
from spark_sink.writer import IcebergWriter, Layout, Transaction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = structlog.get_logger("canalbridge.spark")
# An upsert commit broadcasts its changed keys to every executor up to this many staged rows;
# past it, Spark joins them to the target by sorting both (slower, but bounded in memory).
BROADCAST_ROWS = 2_000_000


class IcebergUpsertWriter(IcebergWriter):
    """Keeps the target equal to the source: the last change per key, applied in one atomic step.

    The changed keys are deleted and their new rows inserted on a branch of
    the job's own, then main is fast-forwarded to it in one metadata commit.
    Why not one MERGE INTO: its WHEN NOT MATCHED clause makes Spark join the
    whole target to the changes with a sort-merge join (the changes are the
    side that must be kept, so they cannot be broadcast), and a commit into a
    table of 10M rows cost 4x one into 100k rows (``make bench-target-size``).
    The DELETE's semi join broadcasts the changes' keys instead, so the target
    is only scanned, never shuffled. A target with columns the mapping does
    not fill keeps MERGE INTO, whose UPDATE leaves those columns as they are.
    """

    def before_images(self) -> BeforeImages:
        return BeforeImages.KEY_CHANGES

    def _prepare_table(self, batch: Layout) -> None:
        super()._prepare_table(batch)
        properties = self.table.properties()
        self._check_key(batch, properties)
        mode = "write.merge.mode" if self._unmapped else "write.delete.mode"
        self._layout_note = slow_layout_note(properties, mode)
        if self._layout_note:
            self._log.warning("spark.slow_layout", note=self._layout_note)

    def _check_key(self, batch: Layout, properties: dict[str, str]) -> None:
        """The rows' key must be the one the target records: a fresh mapper learns the source's key from
        the rows, and a key change it never saw the DDL of (a restart past it, a reset) would otherwise
        upsert by other columns than the table's."""
        recorded = properties.get(PROP_PRIMARY_KEY)
        if recorded is None:
            return  # a table made by hand: its key is the rows'
        target_key = json.loads(recorded)
        rows_key = [batch.target_columns[i] for i in batch.key_indexes]
        # As sets: a DDL names the key's columns in its own order, the rows in the table's. The columns that
        # record a row's source are the channel's, whatever the source's key.
        origin = {c.lower() for c in self.channel.origin_columns} if self.channel.source_in_key else set()
        if {k.lower() for k in rows_key} - origin == {k.lower() for k in target_key} - origin:
            return
        if self.channel.key is not None:
            remedy = "the channel's key setting is not the one the target was made with; set it back, or rebuild " \
                     "the target (docs/guide/operations.md#reset)"
        else:
            remedy = "the source's primary key changed by a DDL this channel did not apply (behind where it " \
                     "resumed, or not read); rebuild the target (docs/guide/operations.md#reset), or give the " \
                     "target the rows' key (table property and identifier fields) and resume"
        raise TargetKeyMismatchError(batch.table, self.channel.target, rows_key, target_key, remedy)

    def truncate(self, summary: dict[str, str]) -> None:
        # Every row goes in one commit (Iceberg drops whole files: no delete files are written). On an
        # empty table Iceberg may commit nothing: the DDL is then met again after a restart, to no effect.
        def delete_all() -> None:
            self.spark.sql(f"DELETE FROM {self.table.identifier}")

        with_commit_properties(self.spark, summary, delete_all)
        self._log.info("spark.truncated")

    def _stage(self, batch: RowBatch) -> list[tuple]:
        # An UPDATE_BEFORE comes only when the key changed: it deletes the old key.
        return [("D" if row.kind.removes else "U", self._next_seq(), *row.values) for row in batch.rows]

    def _from_changes(self, changes: DataFrame, batch: Layout) -> DataFrame:
        from pyspark.sql import functions as F

        op = F.when(removes(F.col("_kind")), F.lit("D")).otherwise(F.lit("U")).alias("_op")
        return changes.select(op, "_seq", *[f"c{index}" for index in range(len(batch.columns))])

    def _typed(self, staged: DataFrame, batch: Layout) -> DataFrame:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = [F.col(f"c{index}") for index in batch.key_indexes]
        latest = Window.partitionBy(*keys).orderBy(F.col("_seq").desc())
        last_change = staged.withColumn("_rank", F.row_number().over(latest)).where(F.col("_rank") == 1)
        return last_change.select(*self._converted(batch), F.col("_op"))

    def _with_chunks(self, staged: DataFrame | None, batch: Layout, chunks: list[tuple[int, ChunkBatch]]
                     ) -> DataFrame:
        """The last change per key among the staged rows and the chunks' rows (:meth:`_chunk_rows`), each chunk
        row an upsert at its chunk's ``_seq``. Keys compare typed here, as in the chunks."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        width = len(batch.target_columns)
        typed = [convert(F.col(f"c{index}"), column.mysql_type).alias(f"c{index}")
                 for index, column in enumerate(batch.columns)]
        frames = [] if staged is None else [staged.select(*typed, "_op", "_seq", F.lit(False).alias("_chunk"))]
        for seq, chunk in chunks:
            frames.append(self._chunk_rows(chunk, batch).select(
                *[f"c{index}" for index in range(width)], F.lit("U").alias("_op"),
                F.lit(seq).cast("bigint").alias("_seq"), F.lit(True).alias("_chunk")))
        union = functools.reduce(lambda one, other: one.unionByName(other), frames)
        named = [F.col(f"c{index}").alias(name) for index, name in enumerate(batch.target_columns)]
        if staged is None and len(chunks) == 1:
            # One chunk alone: its keys are unique already (a key range of a key that holds no NULL), and
            # ranking them would shuffle every row for nothing.
            return union.select(*named, "_op", "_chunk")
        latest = Window.partitionBy(*[F.col(f"c{index}") for index in batch.key_indexes]).orderBy(F.col("_seq").desc())
        last_change = union.withColumn("_rank", F.row_number().over(latest)).where(F.col("_rank") == 1)
        return last_change.select(*named, "_op", "_chunk")

    def _write(self, frame: DataFrame, txn: Transaction, properties: dict[str, str], publish: bool) -> None:
        assert txn.batch is not None
        names = [quote(name) for name in txn.batch.target_columns]
        keys = [quote(txn.batch.target_columns[i]) for i in txn.batch.key_indexes]
        if self._unmapped:
            frame.createOrReplaceTempView(self._view)
            if publish and not self._holding:
                self._merge(self.table.identifier, names, keys, properties)
            else:
                self._held_write(lambda target: self._merge(target, names, keys, properties), publish)
            return
        with _computed_once(frame) as changes:
            changes.createOrReplaceTempView(self._view)
            broadcast = txn.staged_rows <= BROADCAST_ROWS
            bound = _key_bound(changes, _leading_key(txn)) if txn.chunks else ""
            # Two statements: always on the branch, so that main moves once.
            self._held_write(
                lambda target: self._delete_and_insert(target, names, keys, broadcast, bound, properties), publish)

    def _delete_and_insert(self, target: str, names: list[str], keys: list[str], broadcast: bool, bound: str,
                           properties: dict[str, str]) -> None:
        columns, key_list = ", ".join(names), ", ".join(keys)
        hint = f"/*+ BROADCAST({self._view}) */ " if broadcast else ""
        delete = f"DELETE FROM {target} WHERE {bound}({key_list}) IN (SELECT {hint}{key_list} FROM {self._view})"
        insert = f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {self._view} WHERE _op <> 'D'"

        def delete_and_insert() -> None:
            self.spark.sql(delete)
            self.spark.sql(insert)  # always a snapshot, even of no rows: the position's

        with_commit_properties(self.spark, properties, delete_and_insert)

    def _merge(self, target: str, names: list[str], keys: list[str], properties: dict[str, str]) -> None:
        on = " AND ".join(f"t.{k} = s.{k}" for k in keys)
        assignments = ", ".join(f"t.{n} = s.{n}" for n in names)
        statement = (
            f"MERGE INTO {target} t USING {self._view} s ON {on} "
            f"WHEN MATCHED AND s._op = 'D' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {assignments} "
            f"WHEN NOT MATCHED AND s._op <> 'D' THEN INSERT ({', '.join(names)}) "
            f"VALUES ({', '.join('s.' + n for n in names)})"
        )

        def merge() -> None:
            self.spark.sql(statement)

        with_commit_properties(self.spark, properties, merge)


def _leading_key(txn: Transaction) -> str:
    """The target column of the first column of the key the transaction's chunks were read by (the order a
    table's chunks go in), else of the rows' key."""
    assert txn.batch is not None
    chunk = txn.chunks[0][1]
    lead = chunk.progress.key[0].lower() if chunk.progress.key else None
    names = [index for index, column in enumerate(chunk.columns) if column.name.lower() == lead]
    return chunk.target_columns[names[0]] if names else txn.batch.target_columns[txn.batch.key_indexes[0]]


def _key_bound(changes: DataFrame, column: str) -> str:
    """A condition that holds for every key of ``changes``, as SQL to put before the DELETE's own: ``column``
    between its least and greatest value among the chunks' rows, or among the stream's ("" if ``column`` is
    not a number).

    It changes nothing the DELETE removes, but Iceberg compares it with each data file's bounds and skips
    the files it excludes: a chunk's keys are one key range, and a chunk into keys the target does not hold
    yet then reads none of the target (without it, every chunk scanned the whole target, and an initial
    load took time quadratic in the table's size). The stream's keys get their own range: inserts at the
    top of the key would otherwise stretch the chunk's range over the whole table.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, IntegralType

    kind = changes.schema[column].dataType
    if not isinstance(kind, IntegralType) and not (isinstance(kind, DecimalType) and kind.scale == 0):
        return ""  # (text, dates: their literals are not worth the risk; those chunks scan the target)
    key = F.col(quote(column))
    suffix = "BD" if isinstance(kind, DecimalType) else ""  # (an integer literal widens to the column's type)
    bounds = sorted((int(low), int(high)) for _, low, high in
                    changes.groupBy("_chunk").agg(F.min(key), F.max(key)).collect() if low is not None)
    ranges = [f"{quote(column)} BETWEEN {low}{suffix} AND {high}{suffix}" for low, high in bounds]
    return f"({' OR '.join(ranges)}) AND " if ranges else ""


@contextmanager
def _computed_once(frame: DataFrame) -> Iterator[DataFrame]:
    """``frame`` computed now and held in Spark's block manager (memory, then local disk) until the
    block ends, so that statements reading it do not each decode, rank and convert it again.

    The upsert's DELETE (its keys) and INSERT (its rows) read the same changes:
    without this, every commit ran the decoder, the window and the casts twice
    and Spark planned them twice. ``localCheckpoint`` rather than ``persist``:
    it also cuts the lineage, so both statements plan a scan of held rows
    (measured: ``persist`` saved 8% of the JVM's CPU per row, this 23-30%).
    An executor lost while it runs fails the commit, which is replayed.
    """
    held = frame.localCheckpoint(eager=True)
    try:
        yield held
    finally:
        release_checkpoint(held)
