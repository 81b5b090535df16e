"""Channel writers into Iceberg: upsert (delete and insert by key) and changelog (append) modes.

Both stage the open transaction's rows as text (:mod:`spark_sink.staging`),
or, with the JVM decoder, its RowChange bytes as Canal sent them, decoded
into the same rows in Spark (:mod:`spark_sink.decode`); they convert them to
typed columns in Spark (:mod:`spark_sink.types`) at commit,
and write them as one Iceberg commit whose snapshot summary carries the
channel's end position (:mod:`spark_sink.commit_properties`), so that
:meth:`committed_position` can read it back after a restart.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from canalbridge.sync.changes import Alteration, BeforeImages, RawBatch, RowBatch
from canalbridge.sync.ddl import (
    ChangeKey,
    RenameTable,
    SchemaChange,
    TruncateTable,
    column_aliases,
    key_after,
    renamed,
)
from canalbridge.sync.errors import SchemaChangeError, SyncError, TargetKeyMismatchError
from canalbridge.sync.maintenance import MaintenanceReport
from canalbridge.sync.position import EntryPosition, Position
from canalbridge.sync.settings import ChannelSettings, MaintenanceSettings
from spark_sink.commit_properties import with_commit_properties
from spark_sink.decode import RAW_FIELDS, decode_failure, decoded_changes, jvm_decoder, register, removes
from spark_sink.evolve import Column as TargetSchemaColumn
from spark_sink.evolve import EvolutionRefused, MakeNullable, Operation, plan, widening
from spark_sink.identifiers import quote
from spark_sink.session import get_spark, make_active, session_alive
from spark_sink.settings import SparkSettings
from spark_sink.staging import Staging
from spark_sink.table import (
    PROP_COLUMN_ALIASES,
    PROP_PRIMARY_KEY,
    PROP_SOURCE_TABLE,
    TargetColumn,
    TargetTable,
    TargetTableError,
    position_properties,
    slow_layout_note,
)
from spark_sink.types import convert, spark_type

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = structlog.get_logger("canalbridge.spark")
_view_ids = itertools.count(1)
# An upsert commit broadcasts its changed keys to every executor up to this many staged rows;
# past it, Spark joins them to the target by sorting both (slower, but bounded in memory).
BROADCAST_ROWS = 2_000_000
# Spark error classes that retrying the same rows cannot fix.
_DATA_ERRORS = ("CAST_INVALID_INPUT", "NUMERIC_VALUE_OUT_OF_RANGE", "CAST_OVERFLOW", "DATETIME_OVERFLOW")


class ValueConversionError(SyncError):
    """A value that is not a value of its column's type (e.g. "abc" for an int)."""

    transient = False

    def __init__(self, table: str, message: str) -> None:
        self.table = table
        super().__init__(f"table {table}: a value does not convert to its column type: {message}")


@dataclass
class _Transaction:
    """One transaction's staged rows and column facts; staged by the channel thread, then applied."""

    staging: Staging  # decoded rows
    raw_staging: Staging  # RowChange bytes, for the JVM decoder: a transaction stages into one of the two
    batch: RowBatch | RawBatch | None = None  # the column facts of its last batch
    seq: int = 0
    staged_rows: int = 0  # row changes staged (the RowChanges' rowsCount, when undecoded)

    def clear(self) -> None:
        self.staging.clear()
        self.raw_staging.clear()


@dataclass(frozen=True)
class _Sealed:
    """A sealed transaction of an Iceberg writer."""

    writer: _IcebergWriter
    txn: _Transaction

    def apply(self, end_position: Position, label: str, *, publish: bool = True,
              behind: Position | None = None) -> None:
        self.writer._apply(self.txn, end_position, label, publish, behind)

    def discard(self, reason: str) -> None:
        self.txn.clear()


class _IcebergWriter:
    """What both modes share: the target table, staging, and the position bookkeeping."""

    meta_fields: tuple[tuple[str, str], ...] = (("_op", "string"), ("_seq", "bigint"))

    def __init__(self, spark: SparkSession, channel: ChannelSettings, job: str, settings: SparkSettings) -> None:
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
        self._view = f"canalbridge_staged_{next(_view_ids)}"
        self._ready = False
        self._prepared_for: tuple[str, ...] = ()  # the columns the table was last checked for
        self._unmapped: list[TargetSchemaColumn] = []  # target columns the mapping does not fill
        self._open = self._new_transaction()
        # Applies held back from main (see SealedTransaction.apply) are on this branch until one publishes.
        self._branch = f"canalbridge-staging-{job}"
        self._holding = False
        self._layout_note: str | None = None  # read from the table by the channel thread, for status
        self._log = log.bind(job=job, channel=channel.source, target=channel.target)

    # -- ChannelWriter --------------------------------------------------------------------

    def target_columns(self) -> tuple[str, ...] | None:
        self._reconnect_if_lost()
        columns = self.table.columns()
        if columns is None:
            return None
        return tuple(c for c in columns if c not in self._own_columns())

    def layout_note(self) -> str | None:
        return self._layout_note

    def committed_position(self) -> Position | None:
        self._reconnect_if_lost()
        if self.table.columns() is None:
            return None
        return self.table.last_position(self.job)

    def committed_label(self) -> str | None:
        self._reconnect_if_lost()
        if self.table.columns() is None:
            return None
        return self.table.last_label(self.job)

    def committed_refill(self) -> Position | None:
        self._reconnect_if_lost()
        if self.table.columns() is None:
            return None
        return self.table.last_refill(self.job)

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        raise TypeError(f"target {self.channel.target}: an upsert target keeps no position per change")

    def forget_position(self) -> None:
        self._reconnect_if_lost()
        if self.table.columns() is not None:
            self.table.forget_position(self.job)

    def begin(self) -> None:
        self._reconnect_if_lost()
        self._open.clear()
        self._open = self._new_transaction()

    def send(self, batch: RowBatch) -> None:
        txn = self._open
        assert not txn.raw_staging.count, "decoded rows and RowChange bytes in one transaction"
        txn.batch = batch
        txn.staging.add(self._stage(batch))
        txn.staged_rows += len(batch.rows)

    def decodes_row_changes(self) -> bool:
        return self._decodes

    def send_raw(self, batch: RawBatch) -> None:
        assert self._decodes, "RowChange bytes sent to a writer that does not decode them"
        txn = self._open
        assert not txn.staging.count, "decoded rows and RowChange bytes in one transaction"
        txn.batch = batch
        changes = batch.changes
        positions = [c.position for c in changes]
        first = txn.seq + 1
        txn.seq += len(changes)
        txn.raw_staging.add_columns([range(first, txn.seq + 1), [p.journal for p in positions],
                                     [p.offset for p in positions], [p.execute_time_ms for p in positions],
                                     [c.row_change for c in changes]])
        txn.staged_rows += sum(max(c.rows, 1) for c in changes)

    def seal(self) -> _Sealed:
        sealed = _Sealed(self, self._open)
        self._open = self._new_transaction()
        return sealed

    def commit(self, end_position: Position, label: str) -> None:
        """Seal the open transaction and apply it at once."""
        self.seal().apply(end_position, label)

    def _apply(self, txn: _Transaction, end_position: Position, label: str, publish: bool,
               behind: Position | None) -> None:
        """Apply a sealed transaction (on the thread that applies them all, one at a time)."""
        batch = txn.batch
        try:
            if batch is None:
                if publish and self._holding:
                    self._publish()
                return
            self._reconnect_if_lost()  # (and this thread's active session: ANSI casts)
            if not self._ready or batch.target_columns != self._prepared_for:
                # Here, not while staging: the table is as the transactions before this one left it
                # (a DDL among them may have changed its columns).
                self._prepare_table(batch)
            properties = position_properties(self.job, label, end_position, behind)
            if txn.raw_staging.count:
                register(self.spark)  # again after a lost session
                keys = batch.key_indexes if self.before_images() is BeforeImages.KEY_CHANGES else None
                changes = decoded_changes(txn.raw_staging.to_dataframe(self.spark), batch.columns, keys,
                                          source_key=self.channel.key is None)
                staged = self._from_changes(changes, batch)
            else:
                staged = txn.staging.to_dataframe(self.spark)
            self._write(self._typed(staged, batch), txn, properties, publish)
        except Exception as exc:
            # Whatever failed (the table's checks, a lost session, the write): what the branch holds
            # is dropped, and the next apply starts it from main again.
            self._holding = False
            failure = decode_failure(exc, self.channel.source)
            if failure is not None:
                raise failure from exc
            reason = _data_error(exc)
            if reason is not None:
                raise ValueConversionError(self.channel.target, reason) from exc
            raise
        finally:
            txn.clear()
            self._drop_view()
        self._log.debug("spark.committed", label=label, position=str(end_position), published=publish)

    def _held_write(self, write: Callable[[str], None], publish: bool) -> None:
        """``write(target)`` onto the job's branch, then main fast-forwarded to it if ``publish``.

        The branch starts from main at the first held write: that drops what
        a commit that failed before its fast-forward left on it, and catches
        up with commits on main by anyone else (compaction, for one). A
        commit on main in between makes the fast-forward fail: the
        transaction is replayed.
        """
        if not self._holding:
            self.table.restart_branch(self._branch)
            self._holding = True
        write(self.table.branch(self._branch))
        if publish:
            self._publish()

    def _publish(self) -> None:
        self.table.fast_forward_main(self._branch)
        self._holding = False

    def abort(self, reason: str) -> None:
        self._open.clear()
        self._open = self._new_transaction()

    def alter(self, alteration: Alteration, stamp: Position, label: str) -> None:
        assert not self._holding, "a DDL applied while rows are held on the branch"
        self._reconnect_if_lost()
        if self.table.columns() is None:
            return  # the table is created from the first rows, with their columns
        summary = position_properties(self.job, label, stamp)
        if any(isinstance(c, TruncateTable) for c in alteration.changes):
            self._truncate(summary)
            return
        own = set(self._own_columns())
        columns = [c for c in self.table.schema() if c.name not in own]
        properties = self.table.properties()
        key = json.loads(properties.get(PROP_PRIMARY_KEY, "[]"))
        new_key = list(key_after(tuple(key), alteration.changes))
        keys_change = any(isinstance(change, ChangeKey) for change in alteration.changes)
        if keys_change and new_key and self.channel.source_in_key:  # rows keep their source in the key
            new_key += [c for c in self.channel.origin_columns if c.lower() not in {k.lower() for k in new_key}]
        try:
            # A key the statement replaces may lose its columns in it (DROP PRIMARY KEY, DROP COLUMN id, ...).
            operations = plan(columns, alteration.changes, drop_columns=alteration.drop_columns,
                              key=new_key if keys_change else key, shared=alteration.shared)
        except EvolutionRefused as exc:
            raise SchemaChangeError(alteration.table, alteration.sql, alteration.position, str(exc)) from exc
        table_properties = {PROP_PRIMARY_KEY: json.dumps(new_key)} if new_key != key else {}
        identifier_fields = None  # (renamed with their columns by Iceberg)
        if keys_change:
            identifier_fields = self._key_identifier_fields(new_key, columns, alteration.changes, operations)
        if alteration.shared:  # the other shards' rows keep the old names until their own DDL
            aliases = json.loads(properties.get(PROP_COLUMN_ALIASES, "{}"))
            now = column_aliases(aliases, tuple(c.name for c in columns), alteration.changes)
            if now != aliases:
                table_properties[PROP_COLUMN_ALIASES] = json.dumps(now, sort_keys=True)
        for change in alteration.changes:
            if isinstance(change, RenameTable):  # a rename the channel follows: read back at its next start
                table_properties[PROP_SOURCE_TABLE] = f"{change.to.schema}.{change.to.table}"
        self.table.evolve(operations, summary, table_properties, identifier_fields)
        self._ready = False  # the next commit checks its columns against the new schema
        self._log.info("spark.schema_changed", sql=alteration.sql, operations=[repr(o) for o in operations])

    def column_aliases(self) -> dict[str, str]:
        self._reconnect_if_lost()
        if self.table.columns() is None:
            return {}
        aliases: dict[str, str] = json.loads(self.table.properties().get(PROP_COLUMN_ALIASES, "{}"))
        return aliases

    def source_table(self) -> str | None:
        self._reconnect_if_lost()
        if self.table.columns() is None:
            return None
        return self.table.properties().get(PROP_SOURCE_TABLE)

    def maintain(self, settings: MaintenanceSettings) -> MaintenanceReport:
        self._reconnect_if_lost()
        if self.table.columns() is None:
            return MaintenanceReport()  # created with the first row
        data_before, deletes_before = self.table.live_files()
        self.table.compact()
        data_after, deletes_after = self.table.live_files()
        files = {"data_files_before": data_before, "data_files_after": data_after,
                 "delete_files_before": deletes_before, "delete_files_after": deletes_after}
        # The snapshot that carries the position, and every one after it, stay: the channel
        # reads its position from main's lineage at its next start.
        keep_from = self.table.position_snapshot_time_ms(self.job)
        if keep_from is None:
            self._log.warning("spark.expiry_skipped", reason="main's lineage holds no position of this job")
            return MaintenanceReport(**files)
        older_than = min(int(time.time() * 1000 - settings.keep_snapshots_hours * 3_600_000), keep_from)
        return MaintenanceReport(**files, snapshots_expired=self.table.expire_snapshots(older_than))

    # -- shared helpers ---------------------------------------------------------------------

    def _reconnect_if_lost(self) -> None:
        """Carry on with a new SparkSession if this one's JVM died (the failed commit was replayed).

        Either way the session is made the calling thread's active one, so that
        the expressions this writer builds read its settings (ANSI casts).
        """
        if not session_alive(self.spark):
            self.spark = get_spark(self.settings)
            self.table = TargetTable(self.spark, self.channel.target)
            self._ready = False
            self._log.warning("spark.writer_reconnected")
        make_active(self.spark)

    def _drop_view(self) -> None:
        try:
            self.spark.catalog.dropTempView(self._view)
        except Exception as exc:  # a dead session must not hide the commit's own error
            self._log.debug("spark.drop_view_failed", error=str(exc))

    def _own_columns(self) -> tuple[str, ...]:
        return ()

    def _prepare_table(self, batch: RowBatch | RawBatch) -> None:
        wanted = list(batch.target_columns)
        if self.table.columns() is None:
            keys = {batch.target_columns[i] for i in batch.key_indexes}
            columns = [
                TargetColumn(name, spark_type(source.mysql_type), name in keys)
                for name, source in zip(batch.target_columns, batch.columns)
            ]
            key_names = [batch.target_columns[i] for i in batch.key_indexes]
            self.table.create(columns + self._own_target_columns(), key_names,
                              identifier_fields=self._identifier_fields(key_names))
            self._log.info("spark.table_created", columns=len(columns))
        self.table.validate(wanted + [c.name for c in self._own_target_columns()])
        schema = {c.name.lower(): c for c in self.table.schema()}
        # A column a DDL added with a narrower type than its rows have (MySQL's REAL is a DOUBLE, sqlglot
        # reads a FLOAT): widened where Iceberg can, so no value is narrowed on the way in.
        widen = [w for name, source in zip(wanted, batch.columns)
                 if (w := widening(schema[name.lower()], spark_type(source.mysql_type))) is not None]
        if widen:
            self.table.evolve(widen, None)
            self._log.info("spark.columns_widened", columns={w.name: w.spark_type for w in widen})
            schema = {c.name.lower(): c for c in self.table.schema()}
        mapped = {name.lower() for name in wanted} | {name.lower() for name in self._own_columns()}
        # Target columns the rows do not fill: a column a DDL dropped and the target kept, or one the user added.
        self._unmapped = [c for name, c in schema.items() if name not in mapped]
        self._prepared_for = batch.target_columns
        self._ready = True

    def _own_target_columns(self) -> list[TargetColumn]:
        return []

    def _truncate(self, summary: dict[str, str]) -> None:
        """A source's TRUNCATE TABLE (``job.schema.truncate = "apply"``), stamped with ``summary``."""
        raise NotImplementedError

    def _identifier_fields(self, key_names: list[str]) -> list[str]:
        return key_names  # one row per key

    def _key_identifier_fields(self, key: list[str], columns: list[TargetSchemaColumn],
                               changes: tuple[SchemaChange, ...], operations: list[Operation]) -> list[str]:
        """Iceberg's identifier fields after the source's primary key became ``key``.

        They must be required columns, and a column Iceberg has as optional cannot become required
        (its old rows may hold nulls): then the table has none, and ``canalbridge.primary-key`` alone
        names the key (the MERGE uses the rows' key either way).
        """
        wanted = self._identifier_fields(key)
        nullable = {o.name.lower() for o in operations if isinstance(o, MakeNullable)}
        required = renamed(tuple(c.name for c in columns if not c.nullable and c.name.lower() not in nullable),
                           changes)
        if all(name.lower() in {r.lower() for r in required} for name in wanted):
            return wanted
        self._log.warning("spark.identifier_fields_dropped", key=key,
                          reason="a key column is optional in Iceberg; canalbridge.primary-key names the key")
        return []

    def _converted(self, batch: RowBatch | RawBatch) -> list[Column]:
        from pyspark.sql import functions as F

        return [
            convert(F.col(f"c{index}"), source.mysql_type).alias(name)
            for index, (name, source) in enumerate(zip(batch.target_columns, batch.columns))
        ]

    def _new_transaction(self) -> _Transaction:
        # Its own directory: a transaction stages while the one sealed before it is applied.
        name = uuid.uuid4().hex
        return _Transaction(Staging(self.meta_fields, self.settings.spill_rows, self._spill_dir / name),
                            Staging(RAW_FIELDS, self.settings.spill_rows, self._spill_dir / f"{name}.raw"))

    def _next_seq(self) -> int:
        txn = self._open
        txn.seq += 1
        return txn.seq

    # -- mode-specific --------------------------------------------------------------------------

    def before_images(self) -> BeforeImages:
        raise NotImplementedError

    def _stage(self, batch: RowBatch) -> list[tuple]:
        raise NotImplementedError

    def _from_changes(self, changes: DataFrame, batch: RowBatch | RawBatch) -> DataFrame:
        """The JVM decoder's change rows as the rows :meth:`_stage` would have staged."""
        raise NotImplementedError

    def _typed(self, staged: DataFrame, batch: RowBatch | RawBatch) -> DataFrame:
        raise NotImplementedError

    def _write(self, frame: DataFrame, txn: _Transaction, properties: dict[str, str], publish: bool) -> None:
        """Write ``frame`` stamped with ``properties``: to main at once, or held (see :meth:`_held_write`)."""
        raise NotImplementedError


class IcebergUpsertWriter(_IcebergWriter):
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

    def _prepare_table(self, batch: RowBatch | RawBatch) -> None:
        super()._prepare_table(batch)
        properties = self.table.properties()
        self._check_key(batch, properties)
        mode = "write.merge.mode" if self._unmapped else "write.delete.mode"
        self._layout_note = slow_layout_note(properties, mode)
        if self._layout_note:
            self._log.warning("spark.slow_layout", note=self._layout_note)

    def _check_key(self, batch: RowBatch | RawBatch, properties: dict[str, str]) -> None:
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

    def _truncate(self, summary: dict[str, str]) -> None:
        # Every row goes in one commit (Iceberg drops whole files: no delete files are written). On an
        # empty table Iceberg may commit nothing: the DDL is then met again after a restart, to no effect.
        def delete_all() -> None:
            self.spark.sql(f"DELETE FROM {self.table.identifier}")

        with_commit_properties(self.spark, summary, delete_all)
        self._log.info("spark.truncated")

    def _stage(self, batch: RowBatch) -> list[tuple]:
        # An UPDATE_BEFORE comes only when the key changed: it deletes the old key.
        return [("D" if row.kind.removes else "U", self._next_seq(), *row.values) for row in batch.rows]

    def _from_changes(self, changes: DataFrame, batch: RowBatch | RawBatch) -> DataFrame:
        from pyspark.sql import functions as F

        op = F.when(removes(F.col("_kind")), F.lit("D")).otherwise(F.lit("U")).alias("_op")
        return changes.select(op, "_seq", *[f"c{index}" for index in range(len(batch.columns))])

    def _typed(self, staged: DataFrame, batch: RowBatch | RawBatch) -> DataFrame:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = [F.col(f"c{index}") for index in batch.key_indexes]
        latest = Window.partitionBy(*keys).orderBy(F.col("_seq").desc())
        last_change = staged.withColumn("_rank", F.row_number().over(latest)).where(F.col("_rank") == 1)
        return last_change.select(*self._converted(batch), F.col("_op"))

    def _write(self, frame: DataFrame, txn: _Transaction, properties: dict[str, str], publish: bool) -> None:
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
            # Two statements: always on the branch, so that main moves once.
            self._held_write(lambda target: self._delete_and_insert(target, names, keys, broadcast, properties),
                             publish)

    def _delete_and_insert(self, target: str, names: list[str], keys: list[str], broadcast: bool,
                           properties: dict[str, str]) -> None:
        columns, key_list = ", ".join(names), ", ".join(keys)
        hint = f"/*+ BROADCAST({self._view}) */ " if broadcast else ""
        delete = f"DELETE FROM {target} WHERE ({key_list}) IN (SELECT {hint}{key_list} FROM {self._view})"
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


class IcebergChangelogWriter(_IcebergWriter):
    """Appends every change as a row: ``_op`` (+I, -U, +U, -D), its binlog position and execute time."""

    meta_fields = (
        ("_op", "string"), ("_seq", "bigint"), ("_journal", "string"), ("_offset", "bigint"),
        ("_execute_time_ms", "bigint"),
    )
    _OWN = ("_op", "_journal", "_offset", "_execute_time", "_seq")

    def before_images(self) -> BeforeImages:
        return BeforeImages.FULL

    def _own_columns(self) -> tuple[str, ...]:
        return self._OWN

    def _identifier_fields(self, key_names: list[str]) -> list[str]:
        return []  # a key appears once per change

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        self._reconnect_if_lost()
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
        rows = self.spark.sql(
            f"SELECT DISTINCT _journal, _offset FROM {self.table.identifier} WHERE {where}",
            args={"first": after.journal, "last": through.journal, "after": after.offset,
                  "through": through.offset},
        ).collect()
        held = {(row["_journal"], int(row["_offset"])) for row in rows}
        return {(journal, offset) for journal, offset in held if after < EntryPosition(journal, offset) <= through}

    def _truncate(self, summary: dict[str, str]) -> None:
        # A changelog keeps what happened; a TRUNCATE's rows are not in Canal's stream to record.
        self._log.warning("spark.truncate_not_applied", reason="a changelog target keeps its history")

    def _own_target_columns(self) -> list[TargetColumn]:
        return [
            TargetColumn("_op", "string", True), TargetColumn("_journal", "string", True),
            TargetColumn("_offset", "bigint", True), TargetColumn("_execute_time", "timestamp"),
            TargetColumn("_seq", "bigint", True),
        ]

    def _stage(self, batch: RowBatch) -> list[tuple]:
        return [
            (row.kind.value, self._next_seq(), row.position.journal, row.position.offset,
             row.position.execute_time_ms, *row.values)
            for row in batch.rows
        ]

    def _from_changes(self, changes: DataFrame, batch: RowBatch | RawBatch) -> DataFrame:
        return changes.withColumnRenamed("_kind", "_op")  # the decoder's kinds are the changelog's _op codes

    def _typed(self, staged: DataFrame, batch: RowBatch | RawBatch) -> DataFrame:
        from pyspark.sql import functions as F

        execute_time = F.timestamp_millis(F.col("_execute_time_ms")).alias("_execute_time")
        unfilled = [F.lit(None).cast(c.spark_type).alias(c.name) for c in self._unmapped]  # NULL in new rows
        return staged.select(
            *self._converted(batch), *unfilled, F.col("_op"), F.col("_journal"), F.col("_offset"), execute_time,
            F.col("_seq"),
        )

    def _write(self, frame: DataFrame, txn: _Transaction, properties: dict[str, str], publish: bool) -> None:
        def append(target: str) -> None:
            writer = frame.writeTo(target)
            for key, value in properties.items():
                writer = writer.option(f"snapshot-property.{key}", value)
            writer.append()

        if publish and not self._holding:
            append(self.table.identifier)  # one snapshot: straight onto main
        else:
            self._held_write(append, publish)


def make_writer(
    spark: SparkSession, channel: ChannelSettings, job: str, settings: SparkSettings
) -> IcebergUpsertWriter | IcebergChangelogWriter:
    """The writer for a channel's ``mode``."""
    if channel.mode == "changelog":
        return IcebergChangelogWriter(spark, channel, job, settings)
    if channel.mode == "upsert":
        return IcebergUpsertWriter(spark, channel, job, settings)
    raise TargetTableError(f"channel {channel.source}: unknown mode {channel.mode!r} (upsert or changelog)")


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
        try:
            # Unpersisted now rather than when a JVM garbage collection lets Spark's cleaner find
            # it: a daemon that commits every few seconds would fill the block manager first.
            held._jdf.queryExecution().logical().rdd().unpersist(False)
        except Exception as exc:  # a dead session must not hide the commit's own error
            log.debug("spark.release_failed", error=str(exc))


_DATA_ERROR_RE = re.compile(r"\[(?:" + "|".join(_DATA_ERRORS) + r")\][^\n]*?\.(?=\s|$)")


def _data_error(exc: BaseException) -> str | None:
    """Spark's sentence about a value that cannot convert (it names the value), if that is the error."""
    match = _DATA_ERROR_RE.search(str(exc))
    return match.group(0) if match else None
