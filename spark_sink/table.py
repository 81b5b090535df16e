"""The target Iceberg table of a channel: find it, create it from the source, validate a mapping."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from canalbridge.sync.position import EntryPosition
from spark_sink.identifiers import quote, quote_table, split_table, sql_string

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Snapshot-summary keys that carry a channel's position.
PROP_JOB = "canalbridge.job"
PROP_LABEL = "canalbridge.label"
PROP_JOURNAL = "canalbridge.journal"
PROP_OFFSET = "canalbridge.offset"
PROP_GTID = "canalbridge.gtid"
PROP_EXECUTE_TIME = "canalbridge.execute-time"
# Table property recording the MySQL primary key. Iceberg identifier fields
# would be the natural place, but Iceberg 1.6-1.9 fails every merge-on-read
# MERGE/UPDATE/DELETE on a table that has them (apache/iceberg#11709).
PROP_PRIMARY_KEY = "canalbridge.primary-key"


class TargetTableError(Exception):
    """The target table cannot take this channel's rows; names table and column."""


@dataclass(frozen=True)
class TargetColumn:
    name: str
    spark_type: str
    not_null: bool = False


def position_properties(job: str, label: str, position: EntryPosition) -> dict[str, str]:
    return {
        PROP_JOB: job,
        PROP_LABEL: label,
        PROP_JOURNAL: position.journal,
        PROP_OFFSET: str(position.offset),
        PROP_GTID: position.gtid,
        PROP_EXECUTE_TIME: str(position.execute_time_ms),
    }


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

    def create(self, columns: Sequence[TargetColumn], primary_key: Sequence[str]) -> None:
        """Create the table (and its namespace) as format v2 with merge-on-read row-level writes."""
        namespace = ".".join(quote(part) for part in self.parts[:-1])
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        definitions = ", ".join(
            f"{quote(c.name)} {c.spark_type}{' NOT NULL' if c.not_null else ''}" for c in columns
        )
        properties = {
            "format-version": "2",
            "write.merge.mode": "merge-on-read",
            "write.update.mode": "merge-on-read",
            "write.delete.mode": "merge-on-read",
            PROP_PRIMARY_KEY: json.dumps(list(primary_key)),
        }
        rendered = ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in properties.items())
        self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.identifier} ({definitions}) USING iceberg "
                       f"TBLPROPERTIES ({rendered})")

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

    def last_position(self, job: str) -> EntryPosition | None:
        """The position in the newest snapshot this job committed, or None."""
        rows = self.spark.sql(
            f"SELECT summary FROM {self.identifier}.snapshots "
            f"WHERE summary[{sql_string(PROP_JOB)}] = :job ORDER BY committed_at DESC LIMIT 1",
            args={"job": job},
        ).collect()
        if not rows:
            return None
        summary = rows[0]["summary"]
        return EntryPosition(
            summary[PROP_JOURNAL],
            int(summary[PROP_OFFSET]),
            int(summary.get(PROP_EXECUTE_TIME) or 0),
            summary.get(PROP_GTID) or "",
        )
