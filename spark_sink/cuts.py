"""The cut log of Iceberg targets: each consistent cut as a tag in every target and a row in a small Iceberg table.

A cut's tag, ``cut-<job>-<seq>``, marks in each target the snapshot that
holds the source as it stood at the cut: the newest in main's lineage that a
label the cut names for that target stamped (a commit of the cut or, for a
target the cut did not change, an earlier one; later commits and
compactions leave it as it is). A tag keeps its snapshot, and the files it
reads, from expiry. The job keeps its newest ``keep`` tags per target and
drops the older ones in the metadata commit that adds a tag. Only once every
target carries the cut's tag does the log table get the cut's row: the
newest row of a job names a cut every target can be read at.
"""

from __future__ import annotations

import datetime
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from canalbridge.sync.model.cuts import Cut, PublishedCut
from canalbridge.sync.settings import CutSettings
from spark_sink.errors import TargetTableError
from spark_sink.identifiers import quote, split_table
from spark_sink.session import make_active
from spark_sink.stamp import PROP_JOB, PROP_LABEL
from spark_sink.table import TargetTable, ref_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The log table's columns, in order.
LOG_COLUMNS = (
    ("job", "STRING NOT NULL"),
    ("seq", "BIGINT NOT NULL"),  # the cut's number in the job's log: the newest has the highest
    ("tag", "STRING NOT NULL"),  # the tag every target of the cut carries at its snapshot of the cut
    ("label", "STRING NOT NULL"),  # the transaction whose commit made the cut
    ("position", "STRING NOT NULL"),  # the source position of the cut, as status shows positions
    ("execute_time", "TIMESTAMP"),  # when the source executed the last change at or before the cut
    ("published_at", "TIMESTAMP NOT NULL"),
    ("snapshots", "MAP<STRING, BIGINT> NOT NULL"),  # each target -> its snapshot at the cut
)
# Snapshots a lineage walk looks at before it gives up on finding a cut's.
MAX_WALK = 100_000
# Tries at a tag, each after a commit of the target's channel landed in between.
TAG_ATTEMPTS = 5
# The log table's own old snapshots are expired once in this many cuts.
EXPIRE_EVERY = 20


def default_log_table(first_target: str) -> str | None:
    """``canalbridge.cuts`` in the catalog of ``first_target`` (None if that name is malformed)."""
    try:
        catalog = split_table(first_target)[0]
    except ValueError:
        return None
    return f"{quote(catalog)}.canalbridge.cuts"


def tag_name(job: str, seq: int) -> str:
    return f"cut-{job}-{seq}"


class IcebergCutLog:
    """A job's cut log over Iceberg (a :class:`~canalbridge.sync.job.cuts.CutLog`). ``publish`` and ``latest``
    may be called from any thread; one publishes at a time."""

    def __init__(self, spark: Callable[[], SparkSession], job: str, settings: CutSettings, table: str) -> None:
        try:
            split_table(table)
        except ValueError as exc:
            raise TargetTableError(f"job {job}: the cut log table {table!r} must be catalog.namespace.table") from exc
        self._spark = spark
        self.job = job
        self.keep = settings.keep
        self.table = table
        self._lock = threading.Lock()
        self._next_seq: int | None = None
        self._tag = re.compile(re.escape(f"cut-{job}-") + r"(\d+)")

    def latest(self) -> PublishedCut | None:
        with self._lock:
            log = TargetTable(self._session(), self.table)
            if log.columns() is None:
                return None
            rows = log.spark.sql(f"SELECT * FROM {log.identifier} WHERE job = :job ORDER BY seq DESC LIMIT 1",
                                 args={"job": self.job}).collect()
            return None if not rows else self._published(rows[0].asDict())

    def publish(self, cut: Cut) -> PublishedCut:
        with self._lock:
            spark = self._session()
            log = self._log_table(spark)
            seq = self._seq(log)
            tag = tag_name(self.job, seq)
            snapshots = {target: self._tag_target(spark, target, labels, tag, seq)
                         for target, labels in sorted(cut.targets.items())}
            published_ms = int(time.time() * 1000)
            execute_ms = cut.position.to_dict().get("execute_time_ms")
            row = (self.job, seq, tag, cut.label, str(cut.position),
                   None if not isinstance(execute_ms, int) else _timestamp(execute_ms), _timestamp(published_ms),
                   snapshots)
            schema = ", ".join(f"{name} {kind.replace(' NOT NULL', '')}" for name, kind in LOG_COLUMNS)
            # The row, and the job's rows whose tags are gone dropped, in one commit. (Each row is a file of its
            # own, with full column metrics: the condition takes whole files.)
            from pyspark.sql import functions as F

            gone = (F.col("job") == self.job) & (F.col("seq") <= seq - self.keep)
            spark.createDataFrame([row], schema).writeTo(log.identifier).overwrite(gone)
            self._next_seq = seq + 1
            if seq % EXPIRE_EVERY == 0:
                log.iceberg_table().expireSnapshots().expireOlderThan(int(time.time() * 1000)).retainLast(
                    self.keep).commit()
            return PublishedCut(seq, tag, cut.label, str(cut.position), snapshots, published_ms, self.table)

    def _session(self) -> SparkSession:
        spark = self._spark()
        make_active(spark)
        return spark

    def _log_table(self, spark: SparkSession) -> TargetTable:
        log = TargetTable(spark, self.table)
        if log.columns() is None:
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {'.'.join(quote(part) for part in log.parts[:-1])}")
            columns = ", ".join(f"{name} {kind}" for name, kind in LOG_COLUMNS)
            spark.sql(f"CREATE TABLE IF NOT EXISTS {log.identifier} ({columns}) USING iceberg TBLPROPERTIES "
                      f"('format-version'='2', 'write.metadata.delete-after-commit.enabled'='true', "
                      f"'write.metadata.previous-versions-max'='10', 'write.metadata.metrics.default'='full')")
        return log

    def _seq(self, log: TargetTable) -> int:
        if self._next_seq is None:
            rows = log.spark.sql(f"SELECT max(seq) AS seq FROM {log.identifier} WHERE job = :job",
                                 args={"job": self.job}).collect()
            self._next_seq = (rows[0]["seq"] or 0) + 1
        return self._next_seq

    def _tag_target(self, spark: SparkSession, target: str, labels: frozenset[str], tag: str, seq: int) -> int:
        """Tag ``target``'s snapshot of the cut, dropping the job's tags that fall out of the newest ``keep``, in
        one metadata commit; the snapshot's id."""
        table = TargetTable(spark, target).iceberg_table()
        for attempt in range(1, TAG_ATTEMPTS + 1):
            with ref_lock(target):
                table.refresh()  # (the catalog's cache may not have the cut's commit yet)
                snapshot_id = self._snapshot_at(table, target, labels)
                manage = table.manageSnapshots()
                refs = table.refs()
                if refs.containsKey(tag):  # (a publish that failed before its row left it: the log never named it)
                    manage = manage.replaceTag(tag, snapshot_id)
                else:
                    manage = manage.createTag(tag, snapshot_id)
                for name in list(refs.keySet()):
                    match = self._tag.fullmatch(str(name))
                    if match is not None and int(match.group(1)) <= seq - self.keep:
                        manage = manage.removeTag(name)
                try:
                    manage.commit()
                    break
                except Exception as exc:
                    # A commit of the channel's landed meanwhile, and Iceberg does not retry a change of refs.
                    if attempt == TAG_ATTEMPTS or "CommitFailedException" not in str(exc):
                        raise
        ref = table.refs().get(tag)
        if ref is None or not ref.isTag() or ref.snapshotId() != snapshot_id:
            raise TargetTableError(f"target {target}: the tag {tag} canalbridge just made is not in the table its "
                                   f"catalog returns: the catalog does not keep Iceberg's tags")
        return snapshot_id

    def _snapshot_at(self, table: Any, target: str, labels: frozenset[str]) -> int:
        """The newest snapshot in main's lineage that one of ``labels`` stamped (a commit in steps stamps its
        earlier ones ``label~n``)."""
        snapshot = table.currentSnapshot()
        for _ in range(MAX_WALK):
            if snapshot is None:
                break
            summary = snapshot.summary()
            label = summary.get(PROP_LABEL)
            if summary.get(PROP_JOB) == self.job and label is not None and str(label).split("~")[0] in labels:
                return int(snapshot.snapshotId())
            parent = snapshot.parentId()
            snapshot = table.snapshot(parent) if parent is not None else None
        raise TargetTableError(f"target {target}: no snapshot in main's lineage carries the commit "
                               f"{' or '.join(sorted(labels))} of job {self.job} (expired, or main was rolled back)")

    def _published(self, row: Mapping[str, Any]) -> PublishedCut:
        return PublishedCut(int(row["seq"]), str(row["tag"]), str(row["label"]), str(row["position"]),
                            {str(k): int(v) for k, v in (row["snapshots"] or {}).items()},
                            int(row["published_at"].timestamp() * 1000), self.table)


def _timestamp(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
