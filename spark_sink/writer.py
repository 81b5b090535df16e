"""The Iceberg transaction writer: staging, applying, holding writes on a branch, in the write mode it holds.

A transaction stages its rows as text (:mod:`spark_sink.staging`), or, with
the JVM decoder, its RowChange bytes as Canal sent them, decoded into the
same rows in Spark (:mod:`spark_sink.decode`). At apply they are converted
to typed columns in Spark (:mod:`spark_sink.types`) and written as one
Iceberg commit whose snapshot summary carries the channel's end position
(:mod:`spark_sink.stamp`), read back after a restart
(:mod:`spark_sink.target_state`). What the modes do differently is a
:class:`~spark_sink.write_mode.WriteMode` the writer holds
(:mod:`spark_sink.upsert`, :mod:`spark_sink.changelog`). The writer owns the
channel's SparkSession and table handle; the mode, the schema applier, the
maintainer and the state reader act on the table through
:meth:`IcebergWriter.live`.
"""

from __future__ import annotations

import itertools
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import structlog

from canalbridge.sync.model.changes import BeforeImages, ChunkBatch, RawBatch, RowBatch
from canalbridge.sync.model.position import Position
from canalbridge.sync.schema.ddl import Place
from canalbridge.sync.settings import ChannelSettings
from canalbridge.sync.snapshot.progress import TableProgress
from spark_sink.decode import CHANGE_BITS, RAW_FIELDS, decode_failure, decoded_changes, jvm_decoder, register
from spark_sink.equality import Staged
from spark_sink.errors import ValueConversionError, data_error
from spark_sink.evolve import Add, widening
from spark_sink.evolve import Column as TargetSchemaColumn
from spark_sink.layout import TargetLayout
from spark_sink.session import get_spark, make_active, session_alive
from spark_sink.settings import SparkSettings
from spark_sink.shaping import Shaping
from spark_sink.staging import Layout, Staging, Transaction, key_names
from spark_sink.stamp import clear_rebuild, position_properties, rebuild_properties
from spark_sink.table import TargetColumn, TargetTable
from spark_sink.types import convert, spark_type
from spark_sink.write_mode import WriteMode

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = structlog.get_logger("canalbridge.spark")
_view_ids = itertools.count(1)


@dataclass(frozen=True)
class _Sealed:
    """A sealed transaction of an Iceberg writer, and the writer's apply that takes it."""

    apply_txn: Callable[[Transaction, Position, str, bool, Position | None, bool], Staged | None]
    txn: Transaction

    def apply(self, end_position: Position, label: str, *, publish: bool = True,
              behind: Position | None = None) -> None:
        self.apply_txn(self.txn, end_position, label, publish, behind, False)

    def stage(self, end_position: Position, label: str, *, behind: Position | None = None) -> Staged | None:
        return self.apply_txn(self.txn, end_position, label, True, behind, True)

    def discard(self, reason: str) -> None:
        self.txn.clear()


class IcebergWriter:
    """A channel's transactions into its Iceberg table (a :class:`~canalbridge.sync.channel.sink.TransactionWriter`),
    in the write mode ``mode`` makes for it."""

    def __init__(self, spark: SparkSession, channel: ChannelSettings, job: str, settings: SparkSettings,
                 mode: Callable[[IcebergWriter], WriteMode]) -> None:
        self.spark = spark
        self.settings = settings
        self.channel = channel
        self.job = job
        self.table = TargetTable(spark, channel.target)
        safe_name = re.sub(r"[^A-Za-z0-9_.-]", "_", channel.target)
        self._decodes = jvm_decoder(spark, settings)
        # The job's and the table's: no other daemon may run this job (docs/guide/limits.md#spill-dir).
        self._spill_dir = Path(settings.spill_dir) / job / safe_name
        shutil.rmtree(self._spill_dir, ignore_errors=True)  # what a daemon that died mid-transaction left
        self.view = f"canalbridge_staged_{next(_view_ids)}"
        self._ready = False
        self._prepared_for: tuple[str, ...] = ()  # the columns the table was last checked for
        self.unmapped: list[TargetSchemaColumn] = []  # target columns the mapping does not fill
        self.log = log.bind(job=job, channel=channel.source, target=channel.target)
        self.mode = mode(self)
        self.shaping = Shaping(channel, settings.mask_salt)
        self.layout = TargetLayout(channel, self.log)
        self.shaping.parse(spark)
        # The target's columns a commit writes, as the table was last prepared (the rows' columns, shaped).
        self.written_columns: tuple[str, ...] = ()
        self._open = self._new_transaction()
        # Applies held back from main (see sink.SealedTransaction.apply) are on this branch until one publishes.
        self.branch = f"canalbridge-staging-{job}"
        self._holding = False
        # Of each source table whose snapshot began, as the last commit stamped it: every stamp carries it on.
        self.snapshot_progress: dict[str, TableProgress] = {}
        self._held_progress: dict[str, TableProgress] | None = None  # what the writes held on the branch stamp
        # The target waits to be made anew (``canalbridge rebuild``; set by each read of its state): the next
        # apply replaces it. Its mark is dropped once an apply after the replace published.
        self.rebuild_pending = False
        self._replaced = False
        self._reconnecting = threading.Lock()

    # -- TransactionWriter ----------------------------------------------------------------

    def layout_note(self) -> str | None:
        return self.mode.layout_note

    def before_images(self) -> BeforeImages:
        return self.mode.before_images()

    def begin(self) -> None:
        self.live()
        self._open.clear()
        self._open = self._new_transaction()

    def send(self, batch: RowBatch) -> None:
        txn = self._open
        assert not txn.raw_staging.count, "decoded rows and RowChange bytes in one transaction"
        txn.batch = batch
        txn.staging.add(self.mode.stage(batch))
        txn.staged_rows += len(batch.rows)

    def decodes_row_changes(self) -> bool:
        return self._decodes

    def send_raw(self, batch: RawBatch) -> None:
        assert self._decodes, "RowChange bytes sent to a writer that does not decode them"
        txn = self._open
        assert not txn.staging.count, "decoded rows and RowChange bytes in one transaction"
        txn.batch = batch
        run = batch.changes
        first = txn.seq + 1
        txn.seq += len(run)
        txn.raw_staging.add_columns([range(first, txn.seq + 1), run.journals, run.offsets, run.execute_times,
                                     run.row_changes])
        txn.staged_rows += run.row_count

    def send_chunk(self, batch: ChunkBatch) -> None:
        txn = self._open
        txn.batch = txn.batch or batch  # (the stager keeps one layout per transaction)
        txn.chunks.append((self.next_seq(), batch))
        txn.staged_rows += batch.count

    def resume_snapshot(self, progress: Mapping[str, TableProgress]) -> dict[str, TableProgress]:
        """The snapshot's progress as the target's last stamp holds it (read back at start): what every stamp
        carries on until a chunk moves it. Returns it."""
        self.snapshot_progress = dict(progress)
        return dict(progress)

    def seal(self) -> _Sealed:
        sealed = _Sealed(self._apply, self._open)
        self._open = self._new_transaction()
        return sealed

    def commit(self, end_position: Position, label: str) -> None:
        """Seal the open transaction and apply it at once."""
        self.seal().apply(end_position, label)

    def _apply(self, txn: Transaction, end_position: Position, label: str, publish: bool,
               behind: Position | None, stage: bool) -> Staged | None:
        """Apply a sealed transaction (on the thread that applies them all, one at a time); or, with ``stage``,
        stage it for a catalog commit (:meth:`_Sealed.stage`) and return what was staged."""
        batch = txn.batch
        staged: Staged | None = None
        try:
            if stage and (batch is None or self._holding or self.rebuild_pending):
                if batch is not None:
                    self.log.warning("spark.applied_alone", reason="writes are held" if self._holding
                                     else "the target waits to be rebuilt")
                stage = False
            if batch is None:
                if publish and self._holding:
                    self._publish()
                    if self._held_progress is not None:  # (the held writes' stamps carry it: now main's)
                        self.snapshot_progress, self._held_progress = self._held_progress, None
                    self._rebuilt()
                return None
            self.live()  # (and this thread's active session: ANSI casts)
            if self.rebuild_pending or not self._ready or batch.target_columns != self._prepared_for:
                # Here, not while staging: the table is as the transactions before this one left it
                # (a DDL among them may have changed its columns).
                self._prepare_table(batch)
            progress = {**(self._held_progress or self.snapshot_progress),
                        **{chunk.progress.table: chunk.progress for _, chunk in txn.chunks}}
            properties = position_properties(self.job, label, end_position, behind, progress)
            seq_scale = 1
            rows: DataFrame | None = None
            if txn.raw_staging.count:
                register(self.spark)  # again after a lost session
                keys = batch.key_indexes if self.before_images() is BeforeImages.KEY_CHANGES else None
                changes = decoded_changes(txn.raw_staging.to_dataframe(self.spark), batch.columns, keys,
                                          source_key=self.channel.key is None)
                rows = self.mode.from_changes(changes, batch)
                seq_scale = 1 << CHANGE_BITS  # (a decoded change's _seq: its entry's, then its place in it)
            elif txn.staging.count:
                rows = txn.staging.to_dataframe(self.spark)
            if txn.chunks:
                frame = self.mode.with_chunks(rows, batch, [(seq * seq_scale, chunk) for seq, chunk in txn.chunks])
            else:
                assert rows is not None
                frame = self.mode.typed(rows, batch)
            frame = self.shaping.apply(frame, deletes=self.mode.filter_deletes)
            if stage:
                # (The snapshot's progress stays as it was: a job whose cuts are atomic runs no snapshot.)
                staged = self.mode.stage_write(frame, txn, properties)
            else:
                self.mode.write(frame, txn, properties, publish)
            if staged is None and publish:
                self.snapshot_progress, self._held_progress = progress, None
                self._rebuilt()
            elif staged is None:
                self._held_progress = progress  # (what the held writes stamp lands only with them)
        except Exception as exc:
            # Whatever failed (the table's checks, a lost session, the write): what the branch holds
            # is dropped, and the next apply starts it from main again, after checking the table again
            # (it may have been changed behind the writer's back).
            self._holding = False
            self._ready = False
            self._held_progress = None
            failure = decode_failure(exc, self.channel.source)
            if failure is not None:
                raise failure from exc
            reason = data_error(exc)
            if reason is not None:
                raise ValueConversionError(self.channel.target, reason) from exc
            raise
        finally:
            txn.clear()
            self._drop_view()
        self.log.debug("spark.committed", label=label, position=str(end_position), published=publish,
                       staged=staged is not None)
        return staged

    def held_write(self, write: Callable[[str], None], publish: bool) -> None:
        """``write(target)`` onto the job's branch, then main fast-forwarded to it if ``publish``.

        The branch starts from main at the first held write: that drops what
        a commit that failed before its fast-forward left on it, and catches
        up with commits on main by anyone else (compaction, for one). A
        commit on main in between makes the fast-forward fail: the
        transaction is replayed.
        """
        if not self._holding:
            self.table.restart_branch(self.branch)
            self._holding = True
        write(self.table.branch(self.branch))
        if publish:
            self._publish()

    def _publish(self) -> None:
        self.table.fast_forward_main(self.branch)
        self._holding = False

    def abort(self, reason: str) -> None:
        self._open.clear()
        self._open = self._new_transaction()

    # -- shared helpers ---------------------------------------------------------------------

    def live(self) -> TargetTable:
        """The target table, on a new SparkSession if this one's JVM died (the failed commit was replayed).

        Either way the session is made the calling thread's active one, so that
        the expressions this writer builds read its settings (ANSI casts).
        """
        with self._reconnecting:  # (the channel's threads: one replaces the session, the others take it)
            if not session_alive(self.spark):
                self.spark = get_spark(self.settings)
                self.table = TargetTable(self.spark, self.channel.target)
                self._ready = False
                self.log.warning("spark.writer_reconnected")
            make_active(self.spark)
            return self.table

    @property
    def holding(self) -> bool:
        """Whether applies are held on the job's branch, waiting for one that publishes."""
        return self._holding

    def schema_changed(self) -> None:
        """The table's schema was changed: the next apply checks its columns against it again."""
        self._ready = False

    def _drop_view(self) -> None:
        try:
            self.spark.catalog.dropTempView(self.view)
        except Exception as exc:  # a dead session must not hide the commit's own error
            self.log.debug("spark.drop_view_failed", error=str(exc))

    def _rebuilt(self) -> None:
        """An apply published: a table made anew for a rebuild holds the job's stamp, and its mark goes."""
        if self._replaced:
            clear_rebuild(self.table, self.job)
            self._replaced = False
            self.log.info("spark.rebuild_landed")

    def _prepare_table(self, batch: Layout) -> None:
        replacing = self.rebuild_pending
        keys = set(key_names(batch))
        existing = None if replacing else self.table.columns()
        columns = self.shaping.columns(self.spark, [
            TargetColumn(name, spark_type(source.mysql_type), name in keys)
            for name, source in zip(batch.target_columns, batch.columns)
        ], existing, {} if existing is None else self.table.properties())
        wanted = [column.name for column in columns]
        if existing is None:
            keyed_by = key_names(batch)
            made = columns + self.mode.own_target_columns()
            replaced = self.table.properties() if replacing and self.table.columns() is not None else None
            self.table.create(made, keyed_by, identifier_fields=self.mode.identifier_fields(keyed_by),
                              replace=rebuild_properties(self.job) if replacing else None,
                              partition_by=self.layout.spec([c.name for c in made]),
                              properties={**self.layout.made_with(replaced), **self.shaping.record({})})
            if replacing:  # (a replay finds it made anew: a failed apply is replayed into it)
                self.table.drop_branch(self.branch)  # (Iceberg keeps it, at a snapshot main no longer has)
                self.rebuild_pending, self._replaced = False, True
                self.log.warning("spark.table_replaced", columns=len(columns), key=list(keyed_by))
            else:
                self.log.info("spark.table_created", columns=len(columns))
        else:
            computed = {name.lower() for name in self.shaping.computed}
            self._add_columns(existing, [c for c in columns if c.name.lower() in computed]
                              + self.mode.added_columns())
        self.table.validate(wanted + [c.name for c in self.mode.own_target_columns()])
        schema = {c.name.lower(): c for c in self.table.schema()}
        # A column a DDL added with a narrower type than its rows have (MySQL's REAL is a DOUBLE, sqlglot
        # reads a FLOAT): widened where Iceberg can, so no value is narrowed on the way in.
        widen = [w for column in columns
                 if (w := widening(schema[column.name.lower()], column.spark_type)) is not None]
        if widen:
            self.table.evolve(widen, None)
            self.log.info("spark.columns_widened", columns={w.name: w.spark_type for w in widen})
            schema = {c.name.lower(): c for c in self.table.schema()}
        # (with the shaping's record: what a target made before shaping took of it)
        self.layout.apply(self.table, [column.name for column in schema.values()],
                          self.shaping.record if self.shaping.active else None)
        mapped = {name.lower() for name in wanted} | {name.lower() for name in self.mode.own_columns()}
        # Target columns the rows do not fill: a column a DDL dropped and the target kept, or one the user added.
        self.unmapped = [c for name, c in schema.items() if name not in mapped]
        self._prepared_for = batch.target_columns
        self.written_columns = tuple(wanted)
        self._ready = True
        self.mode.prepared(batch)

    def _add_columns(self, existing: list[str], added: list[TargetColumn]) -> None:
        """The columns of ``added`` a target made before lacks (computed columns, or an upsert target's
        ``metadata`` and soft deletes, set since): added, NULL in the rows it holds."""
        have = {name.lower() for name in existing}
        missing = [c for c in added if c.name.lower() not in have]
        if missing:
            self.table.evolve([Add(c.name, c.spark_type, Place()) for c in missing], None)
            self.log.info("spark.columns_added", columns=[c.name for c in missing])

    def converted(self, batch: Layout) -> list[Column]:
        from pyspark.sql import functions as F

        return [
            convert(F.col(f"c{index}"), source.mysql_type).alias(name)
            for index, (name, source) in enumerate(zip(batch.target_columns, batch.columns))
        ]

    def _new_transaction(self) -> Transaction:
        # Its own directory: a transaction stages while the one sealed before it is applied.
        name = uuid.uuid4().hex
        spill_rows, driver = self.settings.spill_rows, self.settings.stages_through_driver
        return Transaction(Staging(self.mode.meta_fields, spill_rows, self._spill_dir / name, through_driver=driver),
                           Staging(RAW_FIELDS, spill_rows, self._spill_dir / f"{name}.raw", through_driver=driver))

    def next_seq(self) -> int:
        txn = self._open
        txn.seq += 1
        return txn.seq

    # -- what a mode asks of its writer -------------------------------------------------------------

    def chunk_rows(self, chunk: ChunkBatch, batch: Layout) -> DataFrame:
        """A chunk's rows as typed columns ``c0``... of ``batch``'s target columns (the source's, then the
        ``origin`` values), without the keys its window noted. Keys compare typed, not as text: a chunk's values
        are read from the source, not sent by Canal, and only the typed values are sure to be equal."""
        from pyspark.sql import functions as F

        width = len(batch.target_columns)
        typed = [convert(F.col(f"c{index}"), column.mysql_type).alias(f"c{index}")
                 for index, column in enumerate(batch.columns)]
        rows = cast("DataFrame", chunk.rows)
        source = width - len(chunk.origin)
        texts = [F.col(f"c{index}") for index in range(source)] + [
            F.lit(value).cast("string").alias(f"c{source + index}") for index, value in enumerate(chunk.origin)]
        frame = rows.select(*texts).select(*typed)
        if chunk.dropped:
            frame = frame.join(self._dropped_keys(chunk), on=[f"c{i}" for i in chunk.key_indexes], how="left_anti")
        return frame

    def _dropped_keys(self, chunk: ChunkBatch) -> DataFrame:
        """The keys a chunk's window noted, typed as the chunk's key columns are."""
        from pyspark.sql import functions as F

        names = [f"c{index}" for index in chunk.key_indexes]
        texts = self.spark.createDataFrame(sorted(chunk.dropped, key=repr),
                                           schema=", ".join(f"{name} string" for name in names))
        return texts.select(*[convert(F.col(name), chunk.columns[index].mysql_type).alias(name)
                              for name, index in zip(names, chunk.key_indexes)])
