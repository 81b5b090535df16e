"""The target Iceberg table of a channel: find it, create it from the source, validate a mapping."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from canalbridge.sync.model.position import Position, position_from_dict
from canalbridge.sync.schema.ddl import Place
from canalbridge.sync.snapshot.progress import TableProgress, progress_from_json, progress_to_json
from spark_sink import equality
from spark_sink.errors import TargetTableError
from spark_sink.evolve import Add, Column, Drop, MakeNullable, Move, Operation, Rename, Widen
from spark_sink.identifiers import quote, quote_table, split_table, sql_string
from spark_sink.session import SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Snapshot-summary keys that carry a channel's position.
PROP_JOB = "canalbridge.job"
PROP_LABEL = "canalbridge.label"
# A commit behind the table's position (it filled in what Canal's first pass missed): where it really
# reached, the position's to_dict() as JSON (see canalbridge.sync.consumer.second_pass.Refill).
PROP_BEHIND = "canalbridge.refill-behind"
# How far the snapshot of each source table came (canalbridge.sync.snapshot.progress), once one began: every
# later commit of the job stamps it again, so the newest stamp always holds it.
PROP_SNAPSHOT = "canalbridge.snapshot"
# Snapshot-summary keys of the positions' to_dict() fields (names kept from the first release);
# a Kafka source's positions add the lane and every lane's mark (JSON).
POSITION_KEYS = {
    "journal": "canalbridge.journal",
    "offset": "canalbridge.offset",
    "gtid": "canalbridge.gtid",
    "execute_time_ms": "canalbridge.execute-time",
    "lane": "canalbridge.kafka-lane",
    "kafka": "canalbridge.kafka-offsets",
}
# Table property recording the MySQL primary key, for every mode; an upsert
# table also gets the key as Iceberg identifier fields (safe since Iceberg
# 1.10: apache/iceberg#11709 failed merge-on-read MERGEs on such tables).
PROP_PRIMARY_KEY = "canalbridge.primary-key"
# The source table's name now, once its channel followed a RENAME TABLE (set with the rename's position).
PROP_SOURCE_TABLE = "canalbridge.source-table"
# A shared target's renamed columns: {old source name (lower case): target column}, for shards not yet renamed.
PROP_COLUMN_ALIASES = "canalbridge.column-aliases"
# Per job (the key ends with the job's name): the snapshot main stood at when `canalbridge reset` made the
# job forget the table's position; positions in that snapshot and its ancestors are not read.
PROP_POSITION_RESET = "canalbridge.position-reset."


@dataclass(frozen=True)
class TargetColumn:
    name: str
    spark_type: str
    not_null: bool = False


def position_properties(job: str, label: str, position: Position, behind: Position | None = None,
                        snapshot: Mapping[str, TableProgress] | None = None) -> dict[str, str]:
    properties = {PROP_JOB: job, PROP_LABEL: label}
    properties.update({POSITION_KEYS[field]: value if isinstance(value, str) else json.dumps(value)
                       for field, value in position.to_dict().items()})
    if behind is not None:
        properties[PROP_BEHIND] = json.dumps(behind.to_dict(), sort_keys=True)
    if snapshot:
        properties[PROP_SNAPSHOT] = progress_to_json(snapshot)
    return properties


def position_from_summary(summary: dict[str, str]) -> Position:
    return position_from_dict({field: summary.get(key) for field, key in POSITION_KEYS.items()})


@dataclass(frozen=True)
class LiveFiles:
    """The files main's current snapshot holds, by kind."""

    data: int = 0
    position_deletes: int = 0
    equality_deletes: int = 0

    @property
    def deletes(self) -> int:
        return self.position_deletes + self.equality_deletes


@dataclass(frozen=True)
class Stamp:
    """What a job's commit stored with its snapshot."""

    position: Position
    label: str | None
    refill: Position | None  # where a commit behind the table's position really reached (see first_pass.Refill)
    committed_ms: int  # when the snapshot was committed
    snapshot: dict[str, TableProgress] = field(default_factory=dict)  # of each source table whose snapshot began


class TargetTable:
    """Catalog operations on one ``catalog.namespace.table``."""

    def __init__(self, spark: SparkSession, target: str) -> None:
        self.spark = spark
        self.target = target
        self.parts = split_table(target)
        if len(self.parts) < 3:
            raise TargetTableError(f"target {target!r} must be catalog.namespace.table")
        self.identifier = quote_table(target)

    def columns(self) -> list[str] | None:
        """Column names in order, or None when the table does not exist."""
        from pyspark.errors import AnalysisException

        try:
            return list(self.spark.table(self.identifier).columns)
        except AnalysisException as exc:
            if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) or "not found" in str(exc).lower():
                return None
            raise

    def create(self, columns: Sequence[TargetColumn], primary_key: Sequence[str], *,
               identifier_fields: Sequence[str] = ()) -> None:
        """Create the table (and its namespace) as format v2 with merge-on-read row-level writes,
        keeping only the newest metadata files.

        ``identifier_fields`` (NOT NULL columns) become Iceberg's identifier
        fields: what engines that upsert by key (Flink, for one) read.
        """
        self._create_namespace(".".join(quote(part) for part in self.parts[:-1]))
        definitions = ", ".join(
            f"{quote(c.name)} {c.spark_type}{' NOT NULL' if c.not_null else ''}" for c in columns
        )
        properties = {
            "format-version": "2",
            "write.merge.mode": "merge-on-read",
            "write.update.mode": "merge-on-read",
            "write.delete.mode": "merge-on-read",
            # Each upsert commit writes four metadata files (branch, delete, insert, fast-forward; one with
            # equality deletes): keep the newest 100 (Iceberg's default) rather than all.
            "write.metadata.delete-after-commit.enabled": "true",
            PROP_PRIMARY_KEY: json.dumps(list(primary_key)),
        }
        rendered = ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in properties.items())
        self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.identifier} ({definitions}) USING iceberg "
                       f"TBLPROPERTIES ({rendered})")
        if identifier_fields:
            fields = ", ".join(quote(name) for name in identifier_fields)
            self.spark.sql(f"ALTER TABLE {self.identifier} SET IDENTIFIER FIELDS {fields}")

    def schema(self) -> list[Column]:
        """The table's columns with their Spark types (the table must exist)."""
        return [Column(f.name, f.dataType.simpleString(), f.nullable)
                for f in self.spark.table(self.identifier).schema.fields]

    def evolve(self, operations: Sequence[Operation], summary: Mapping[str, str] | None,
               properties: Mapping[str, str] | None = None, identifier_fields: Sequence[str] | None = None) -> None:
        """Carry ``operations`` out, set ``properties`` (and ``identifier_fields``, when given) and (with a
        ``summary``) add a snapshot of no files whose summary it is, all in one Iceberg transaction: the
        schema change and the position it carries land together or not at all."""
        spark = self.spark
        jvm = spark._jvm
        assert jvm is not None, "the SparkSession has no JVM"
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, self.target)
        transaction = table.newTransaction()
        if identifier_fields is not None:  # cleared first: the operations may drop or rename an old key column
            update = transaction.updateSchema()
            update.setIdentifierFields(jvm.java.util.ArrayList())
            update.commit()
        for operation in operations:  # one update each: every one sees the names the one before left
            update = transaction.updateSchema().caseSensitive(False)
            if isinstance(operation, Add):
                update.addColumn(operation.name, self._iceberg_type(operation.spark_type))
                self._place(transaction, update, operation.name, operation.place)
            elif isinstance(operation, Rename):
                update.renameColumn(operation.name, operation.new_name)
            elif isinstance(operation, Widen):
                update.updateColumn(operation.name, self._iceberg_type(operation.spark_type))
            elif isinstance(operation, Move):
                self._place(transaction, update, operation.name, operation.place)
            elif isinstance(operation, Drop):
                update.deleteColumn(operation.name)
            elif isinstance(operation, MakeNullable):
                update.makeColumnOptional(operation.name)
            update.commit()
        if identifier_fields:
            schema = transaction.table().schema()
            fields = jvm.java.util.ArrayList()
            for name in identifier_fields:  # as the table spells it: Iceberg looks identifier fields up as given
                field = schema.caseInsensitiveFindField(name)
                fields.add(field.name() if field is not None else name)
            update = transaction.updateSchema()
            update.setIdentifierFields(fields)
            update.commit()
        if properties:
            update_properties = transaction.updateProperties()
            for key, value in properties.items():
                update_properties.set(key, value)
            update_properties.commit()
        if summary is not None:
            append = transaction.newAppend()  # no files: a snapshot for the position alone
            for key, value in summary.items():
                append.set(key, value)
            append.commit()
        transaction.commitTransaction()
        spark.sql(f"REFRESH TABLE {self.identifier}")

    def _iceberg_type(self, spark_type: str) -> Any:
        jvm = self.spark._jvm
        assert jvm is not None
        return jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(
            jvm.org.apache.spark.sql.types.DataType.fromDDL(spark_type))

    @staticmethod
    def _place(transaction: Any, update: Any, name: str, place: Place) -> None:
        if place.first:
            update.moveFirst(name)
        elif place.after is not None:
            after = transaction.table().schema().caseInsensitiveFindField(place.after)
            if after is not None:  # (a column the target never had: the new one goes last)
                update.moveAfter(name, after.name())

    def branch(self, name: str) -> str:
        """The SQL identifier that reads and writes the table's branch ``name``."""
        return f"{self.identifier}.{quote('branch_' + name)}"

    def restart_branch(self, name: str) -> None:
        """Point branch ``name`` at main's current snapshot (Iceberg makes an empty one when main has none)."""
        self.spark.sql(f"ALTER TABLE {self.identifier} CREATE OR REPLACE BRANCH {quote(name)}")

    def fast_forward_main(self, name: str) -> None:
        """Move main to branch ``name`` in one metadata commit; fails unless main is the branch's ancestor."""
        catalog, table = self._procedure_names()
        self.spark.sql(f"CALL {catalog}.system.fast_forward(table => {table}, branch => 'main', "
                       f"to => {sql_string(name)})").collect()

    def forget_position(self, job: str) -> None:
        """Make :meth:`stamp` read none of ``job``'s positions up to main's current snapshot."""
        current = self.spark.sql(f"SELECT snapshot_id FROM {self.identifier}.refs WHERE name = 'main'").collect()
        if not current:
            return  # no snapshot: no position to forget
        self.spark.sql(f"ALTER TABLE {self.identifier} SET TBLPROPERTIES "
                       f"({sql_string(PROP_POSITION_RESET + job)}={sql_string(str(current[0]['snapshot_id']))})")

    def properties(self) -> dict[str, str]:
        """The table's properties (format-version among them)."""
        rows = self.spark.sql(f"SHOW TBLPROPERTIES {self.identifier}").collect()
        return {row["key"]: row["value"] for row in rows}

    def validate(self, wanted: Sequence[str]) -> None:
        """Every mapped column must exist in the table; the error names the first that does not."""
        existing = self.columns()
        if existing is None:
            raise TargetTableError(f"target table {self.target} does not exist")
        lowered = {name.lower() for name in existing}
        for name in wanted:
            if name.lower() not in lowered:
                raise TargetTableError(
                    f"target table {self.target} has no column {name!r} (it has: {', '.join(existing)})"
                )

    def _create_namespace(self, namespace: str) -> None:
        """Create the table's namespace unless it exists, even when another writer creates it meanwhile."""
        try:
            self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        except Exception:
            # IF NOT EXISTS is a check, then an insert: in a shared catalog (JDBC, for one) two channels
            # creating the namespace at once make the later insert fail on a duplicate key.
            if not self._namespace_exists(namespace):
                raise

    def _namespace_exists(self, namespace: str) -> bool:
        try:
            self.spark.sql(f"DESCRIBE NAMESPACE {namespace}").collect()
        except Exception:
            return False
        return True

    def stamp(self, job: str, properties: Mapping[str, str] | None = None) -> Stamp | None:
        """The stamp of the newest snapshot ``job`` committed among main's current snapshot and its
        ancestors; None when the table has no snapshot or that lineage has none of this job's.
        ``properties``: the table's, if the caller read them already."""
        found = self._position_snapshot(job, properties)
        if found is None:
            return None
        committed_ms, summary = found
        behind = summary.get(PROP_BEHIND)
        return Stamp(position_from_summary(summary), summary.get(PROP_LABEL),
                     None if behind is None else position_from_dict(json.loads(behind)), committed_ms,
                     progress_from_json(summary.get(PROP_SNAPSHOT)))

    def _position_snapshot(self, job: str, properties: Mapping[str, str] | None = None,
                           ) -> tuple[int, dict[str, str]] | None:
        """(commit time in ms, summary) of the newest snapshot of ``job`` in main's lineage."""
        # The parent chain, not the newest snapshot by commit time: after rollback_to_snapshot, or
        # with commits on another branch, that snapshot may hold data the table does not (Iceberg's
        # Flink sink finds its last checkpoint the same way). Not history.is_current_ancestor either:
        # history lists only snapshots made current on main, so it misses the ancestors that main
        # gained by a fast-forward or set_current_snapshot to a branch.
        # main first: a commit between the two reads only adds a descendant of it.
        main = f"SELECT snapshot_id FROM {self.identifier}.refs WHERE name = 'main'"
        current = self.spark.sql(main).collect()
        if not current:
            return None
        # One query for the whole graph; only this job's summaries come back, the rest are NULL.
        rows = self.spark.sql(
            f"SELECT snapshot_id, parent_id, unix_millis(committed_at) AS committed_ms, "
            f"IF(summary[{sql_string(PROP_JOB)}] = :job, summary, NULL) AS summary "
            f"FROM {self.identifier}.snapshots",
            args={"job": job},
        ).collect()
        reset = (self.properties() if properties is None else properties).get(PROP_POSITION_RESET + job)
        forgotten = int(reset) if reset else None
        parents = {row["snapshot_id"]: row["parent_id"] for row in rows}
        found = {row["snapshot_id"]: (row["committed_ms"], row["summary"]) for row in rows
                 if row["summary"] is not None}
        snapshot_id = current[0]["snapshot_id"]
        for _ in range(len(parents)):  # bounded: a malformed parent cycle must not hang the job
            if snapshot_id is None or snapshot_id not in parents or snapshot_id == forgotten:
                break  # the first snapshot, an ancestor expired, or where a reset left the table
            if snapshot_id in found:
                return found[snapshot_id]
            snapshot_id = parents[snapshot_id]
        return None

    def compact(self, files: LiveFiles | None = None) -> None:
        """Rewrite small data files and those with many deleted rows, then compact position delete
        files and drop dangling ones (each by Iceberg's default thresholds). A table with equality
        deletes has every data file they apply to rewritten, and then holds none. ``files``: what
        :meth:`live_files` just said, when the caller has it."""
        catalog, table = self._procedure_names()
        options = {"remove-dangling-deletes": "true"}
        equality_deletes = (files or self.live_files()).equality_deletes > 0
        if equality_deletes:
            # An equality delete applies to every older data file, and Iceberg's thresholds never pick a file
            # for one (its delete ratio counts deletes scoped to one file): left alone, they pile up. Every file
            # they touch rewritten, they are all dangling.
            options["delete-file-threshold"] = "1"
        pairs = ", ".join(f"{sql_string(key)}, {sql_string(value)}" for key, value in options.items())
        self.spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => {table}, "
                       f"options => map({pairs}))").collect()
        if equality_deletes:
            try:
                equality.remove_dangling_deletes(self.spark, self.identifier)
            except SparkSetupError:
                pass  # (written by another tool, and no canalbridge jar: what Iceberg removed must do)
        self.spark.sql(f"CALL {catalog}.system.rewrite_position_delete_files(table => {table})").collect()

    def live_files(self) -> LiveFiles:
        """main's live files, by kind."""
        rows = self.spark.sql(f"SELECT content, count(*) AS n FROM {self.identifier}.files GROUP BY content").collect()
        counts = {int(row["content"]): int(row["n"]) for row in rows}  # Iceberg's content: 0 data, 1 and 2 deletes
        return LiveFiles(counts.get(0, 0), counts.get(1, 0), counts.get(2, 0))

    def expire_snapshots(self, older_than_ms: int) -> int:
        """Expire the snapshots committed before ``older_than_ms`` that no branch or tag holds (and
        the files only they need); the number expired."""
        catalog, table = self._procedure_names()
        # Iceberg takes a timestamp literal in the session's zone: let Spark render it. (In an
        # hour that a zone repeats, the literal reads as the earlier instant: older, never newer.)
        older_than = self.spark.sql(f"SELECT CAST(timestamp_millis({int(older_than_ms)}) AS STRING) AS t").first()
        assert older_than is not None
        before = self._snapshot_count()
        self.spark.sql(f"CALL {catalog}.system.expire_snapshots(table => {table}, "
                       f"older_than => TIMESTAMP {sql_string(older_than['t'])})").collect()
        return before - self._snapshot_count()

    def _snapshot_count(self) -> int:
        row = self.spark.sql(f"SELECT count(*) AS n FROM {self.identifier}.snapshots").first()
        return int(row["n"]) if row else 0

    def _procedure_names(self) -> tuple[str, str]:
        """The catalog (quoted) and the table (a SQL string) as Iceberg's procedures take them."""
        return quote(self.parts[0]), sql_string(".".join(quote(part) for part in self.parts[1:]))


def slow_layout_note(properties: dict[str, str], mode_property: str) -> str | None:
    """Why row-level commits that follow ``mode_property`` (``write.delete.mode``...) cost more as
    the table grows, or None. Iceberg's default for every mode is copy-on-write."""
    if properties.get("format-version") == "1":
        return ("Iceberg format v1: every commit rewrites each data file holding a changed key, so commits "
                "slow down as the table grows; upgrade with SET TBLPROPERTIES ('format-version'='2', "
                f"'{mode_property}'='merge-on-read')")
    if properties.get(mode_property, "copy-on-write") != "merge-on-read":
        return (f"{mode_property} is copy-on-write: every commit rewrites each data file holding a changed "
                f"key, so commits slow down as the table grows; set TBLPROPERTIES ('{mode_property}'="
                "'merge-on-read')")
    return None
