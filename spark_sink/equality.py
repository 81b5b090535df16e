"""Upsert commits as equality deletes (``[spark] upsert_deletes``, ``auto`` by default), written in Spark's tasks.

The position path (:mod:`spark_sink.upsert`) finds the rows a commit replaces by a
join that reads the target's key column, and writes position deletes: readers
pay nothing extra, but the join's cost grows with the table. This one writes,
for every changed key, an equality delete of the key and (unless the key is
gone) its new row, with Iceberg's own Parquet writers inside Spark's tasks,
and commits both as one ``RowDelta`` stamped with the channel's position, as
Flink's Iceberg sink does: nothing reads the target, and readers apply the
deletes until compaction rewrites them away. The JVM side is
``spark_sink/decoder/.../EqualityDeltaWriter.java``, in the decoder's jar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from spark_sink.classpath import decoder_class
from spark_sink.errors import java_error

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

WRITER_CLASS = "canalbridge.spark.EqualityDeltaWriter"
log = structlog.get_logger("canalbridge.spark")


@dataclass(frozen=True)
class EqualityCommit:
    """What one equality-delete commit wrote."""

    data_files: int
    delete_files: int
    rows: int  # new rows written
    keys: int  # keys changed: each has an equality delete


NEEDED_BY = '[spark] upsert_deletes = "equality"'


def _writer(spark: SparkSession) -> Any:
    return decoder_class(spark, WRITER_CLASS, NEEDED_BY)


def require(spark: SparkSession) -> None:
    """Raise :class:`SparkSetupError` unless the writer is on Spark's classpath."""
    _writer(spark)


def enable(spark: SparkSession, identifier: str, keys: Sequence[str]) -> str | None:
    """Make ``identifier`` ready for equality deletes keyed by ``keys``, or say why it cannot take them (None:
    it can): it must be a format-2 (or later) table whose Iceberg identifier fields are the key. A
    partitioned table gets an unpartitioned spec that its writes do not use: the
    deletes are written under it, so that Iceberg applies them in every partition and an update that moves
    a row across partitions deletes the old row where it is."""
    reason = _writer(spark).enable(spark._jsparkSession, identifier, list(keys))
    return None if reason is None else str(reason)


def commit(spark: SparkSession, identifier: str, changes: DataFrame, keys: Sequence[str], branch: str | None,
           properties: Mapping[str, str]) -> EqualityCommit:
    """Write ``changes`` (the last change per key: the table's columns by name, then ``_op``, "D" for a key
    that is gone) into ``identifier`` as one RowDelta stamped with ``properties``, onto ``branch`` (None:
    main)."""
    summary = _writer(spark).commit(spark._jsparkSession, identifier, changes._jdf, list(keys), branch,
                                    dict(properties))
    return _summary(summary)


@dataclass(frozen=True)
class Staged:
    """One table's equality-delete commit, written and staged but not committed: main has not moved.
    :func:`spark_sink.catalog_commit.publish` lands it with other tables' in one catalog commit."""

    target: str
    written: EqualityCommit
    handle: Any  # the JVM's canalbridge.spark.StagedDelta

    @property
    def snapshot_id(self) -> int:
        """The id of the snapshot the commit adds."""
        return int(self.handle.snapshotId())

    def discard(self) -> None:
        """Delete the files staging wrote; only for a commit known not to have landed. Never raises: a file it
        cannot delete (the JVM that staged it is gone, the store does not answer) stays as an orphan."""
        try:
            self.handle.discard()
        except Exception as exc:
            log.warning("spark.staged_files_left", target=self.target, error=java_error(exc))


def stage(spark: SparkSession, identifier: str, changes: DataFrame, keys: Sequence[str],
          properties: Mapping[str, str]) -> Staged:
    """Write ``changes`` as :func:`commit` does, but stage the RowDelta instead of committing it."""
    handle = _writer(spark).stage(spark._jsparkSession, identifier, changes._jdf, list(keys), dict(properties))
    return Staged(identifier, _summary(handle.summary()), handle)


def _summary(summary: object) -> EqualityCommit:
    data_files, delete_files, rows, changed = (int(part) for part in str(summary).split(","))
    return EqualityCommit(data_files, delete_files, rows, changed)


def remove_dangling_deletes(spark: SparkSession, identifier: str) -> int:
    """Remove ``identifier``'s equality-delete files that apply to no live data file (after a compaction);
    how many."""
    return int(_writer(spark).removeDanglingEqualityDeletes(spark._jsparkSession, identifier))
