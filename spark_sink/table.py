"""The target Iceberg table of a channel, as the catalog holds it: find it, create it from the source, change its
schema, validate a mapping, move its branches. The stamp its commits carry is :mod:`spark_sink.stamp`; its
maintenance, :mod:`spark_sink.maintainer`."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from canalbridge.sync.model.partitions import PartitionField
from canalbridge.sync.model.sort_order import SortField
from canalbridge.sync.schema.ddl import Place
from spark_sink.errors import TargetTableError
from spark_sink.evolve import Add, Column, Drop, MakeNullable, Move, Operation, Rename, Widen
from spark_sink.identifiers import quote, quote_table, split_table, sql_string

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Table property recording the MySQL primary key, for every mode; an upsert
# table also gets the key as Iceberg identifier fields (safe since Iceberg
# 1.10: apache/iceberg#11709 failed merge-on-read MERGEs on such tables).
PROP_PRIMARY_KEY = "canalbridge.primary-key"
# The source table's name now, once its channel followed a RENAME TABLE (set with the rename's position).
PROP_SOURCE_TABLE = "canalbridge.source-table"
# A shared target's renamed columns: {old source name (lower case): target column}, for shards not yet renamed.
PROP_COLUMN_ALIASES = "canalbridge.column-aliases"


_ref_locks: dict[str, threading.Lock] = {}
_ref_locks_guard = threading.Lock()
# How long a change of refs waits for another on the same target (its commit is one metadata write).
REF_LOCK_TIMEOUT_S = 600.0


@contextlib.contextmanager
def ref_lock(target: str) -> Iterator[None]:
    """Held while this process moves a ref of ``target`` (a branch, main's fast-forward, a tag).

    Iceberg cannot retry such a change when another commit lands between
    its read of the table and its own commit (the change keeps the
    metadata it read), so the channel's branch moves and the cut log's
    tags on one target are made one at a time. A wait past
    :data:`REF_LOCK_TIMEOUT_S` raises, naming the target.
    """
    with _ref_locks_guard:
        lock = _ref_locks.setdefault(target, threading.Lock())
    if not lock.acquire(timeout=REF_LOCK_TIMEOUT_S):
        raise TargetTableError(f"target {target}: another change of its branches or tags in this process has not "
                               f"ended in {REF_LOCK_TIMEOUT_S:.0f} s: its catalog does not answer")
    try:
        yield
    finally:
        lock.release()


@dataclass(frozen=True)
class TargetColumn:
    name: str
    spark_type: str
    not_null: bool = False


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
               identifier_fields: Sequence[str] = (), replace: Mapping[str, str] | None = None,
               partition_by: Sequence[PartitionField] = (), properties: Mapping[str, str] | None = None) -> None:
        """Create the table (and its namespace) as format v2 with merge-on-read row-level writes,
        keeping only the newest metadata files.

        ``identifier_fields`` (NOT NULL columns) become Iceberg's identifier
        fields: what engines that upsert by key (Flink, for one) read.
        ``partition_by``: the table's partition spec; ``properties``: more table properties (the user's), over
        these defaults.
        ``replace``: replace the table that exists, in one metadata commit,
        with an empty one of these columns and key, setting these properties
        too. Iceberg keeps the old snapshots in the table's history (time
        travel reads them until they expire); main starts empty.
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
            **(properties or {}),
            **(replace or {}),
        }
        rendered = ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in properties.items())
        verb = "CREATE OR REPLACE TABLE" if replace is not None else "CREATE TABLE IF NOT EXISTS"
        partitioned = (f" PARTITIONED BY ({', '.join(partition_sql(field) for field in partition_by)})"
                       if partition_by else "")
        self.spark.sql(f"{verb} {self.identifier} ({definitions}) USING iceberg{partitioned} "
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
        jvm = self._jvm()
        transaction = self.iceberg_table().newTransaction()
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
        self.spark.sql(f"REFRESH TABLE {self.identifier}")

    def _iceberg_type(self, spark_type: str) -> Any:
        jvm = self._jvm()
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
        statement = f"ALTER TABLE {self.identifier} CREATE OR REPLACE BRANCH {quote(name)}"
        try:
            with ref_lock(self.target):
                self.spark.sql(statement)
        except Exception as exc:
            # A new table's first commit that failed after it made the branch: main has no snapshot still, and
            # Iceberg replaces a branch only with one. Made anew instead.
            if "main has no snapshot" not in str(exc):
                raise
            self.drop_branch(name)
            with ref_lock(self.target):
                self.spark.sql(statement)
        if not self._has_branch(name):
            raise TargetTableError(
                f"target {self.target}: the branch {name} that canalbridge just made on it is not in the table its "
                f"catalog returns: the catalog does not keep Iceberg's table branches (Nessie's Iceberg REST catalog "
                f"ignores them). canalbridge holds a commit of several steps, a snapshot's chunks and every commit "
                f"of the position path on that branch until they land, so the target needs a catalog that keeps "
                f"branches")

    def _has_branch(self, name: str) -> bool:
        """Whether the table, as its catalog last returned it, has the branch ``name``."""
        ref = self.iceberg_table().refs().get(name)
        return ref is not None and bool(ref.isBranch())

    def _jvm(self) -> Any:
        jvm = self.spark._jvm
        assert jvm is not None, "the SparkSession has no JVM"
        return jvm

    def iceberg_table(self) -> Any:
        """The Iceberg table itself, through the session's catalog (cached there: no request where it is)."""
        return self._jvm().org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, self.target)

    def drop_branch(self, name: str) -> None:
        """Drop branch ``name`` if it exists (a table made anew has no main snapshot to point an old one at)."""
        with ref_lock(self.target):
            self.spark.sql(f"ALTER TABLE {self.identifier} DROP BRANCH IF EXISTS {quote(name)}")

    def fast_forward_main(self, name: str) -> None:
        """Move main to branch ``name`` in one metadata commit; fails unless main is the branch's ancestor."""
        catalog, table = self.procedure_names()
        with ref_lock(self.target):
            self.spark.sql(f"CALL {catalog}.system.fast_forward(table => {table}, branch => 'main', "
                           f"to => {sql_string(name)})").collect()

    def set_properties(self, properties: Mapping[str, str]) -> None:
        """Set table properties, in one metadata commit."""
        rendered = ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in properties.items())
        self.spark.sql(f"ALTER TABLE {self.identifier} SET TBLPROPERTIES ({rendered})")

    def partition_fields(self) -> list[PartitionField]:
        """The fields of the table's current partition spec (void ones, which a dropped field leaves, left out)."""
        table = self.iceberg_table()
        terms = [_term(table.schema(), field) for field in table.spec().fields()]
        return [term for term in terms if term.transform != "void"]

    def sort_fields(self) -> list[SortField]:
        """The fields of the table's sort order (none: unsorted)."""
        table = self.iceberg_table()
        return [SortField(_term(table.schema(), field), str(field.direction().name()) == "DESC",
                          str(field.nullOrder().name()) == "NULLS_FIRST") for field in table.sortOrder().fields()]

    def set_sort_order(self, fields: Sequence[SortField]) -> None:
        """Make ``fields`` the table's sort order, in one metadata commit. Spark's writes then sort each task's
        rows, with no shuffle across tasks but by partition (a range shuffle, Iceberg's default for a sorted
        table, would sample and shuffle every commit's rows)."""
        order = ", ".join(f"{partition_sql(field.term)} {field.order}" for field in fields)
        self.spark.sql(f"ALTER TABLE {self.identifier} WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY {order}")

    def add_partition_fields(self, fields: Sequence[PartitionField]) -> list[PartitionField]:
        """Add those of ``fields`` the table's partition spec lacks, one metadata commit each (the data written
        before keeps its old spec: nothing is rewritten); the fields added. Iceberg does not retry a spec change
        that another commit beat, so this process makes them one at a time per table."""
        with ref_lock(self.target):
            have = {(field.transform, field.column.lower(), field.size) for field in self.partition_fields()}
            missing = [field for field in fields if (field.transform, field.column.lower(), field.size) not in have]
            for field in missing:
                self.spark.sql(f"ALTER TABLE {self.identifier} ADD PARTITION FIELD {partition_sql(field)}")
        return missing

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

    def procedure_names(self) -> tuple[str, str]:
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


def _term(schema: Any, field: Any) -> PartitionField:
    """A JVM partition or sort field of ``schema`` (Iceberg's schema) as the config names one: its transform
    (``bucket[16]`` is a bucket of size 16) of its source column."""
    transform, _, size = str(field.transform().toString()).partition("[")
    return PartitionField(transform, str(schema.findColumnName(field.sourceId())),
                          int(size.rstrip("]")) if size else None)


def partition_sql(field: PartitionField) -> str:
    """A partition field as Spark's Iceberg DDL writes it (``bucket(16, `id`)``, ``days(`ts`)``)."""
    column = quote(field.column)
    if field.transform == "identity":
        return column
    if field.size is not None:
        return f"{field.transform}({field.size}, {column})"
    return f"{field.transform}s({column})"  # years, months, days, hours
