"""The cut log of Iceberg targets: each consistent cut as a tag in every target and a row in a small Iceberg table.

A cut's tag, ``cut-<job>-<seq>``, marks in each target the snapshot that
holds the source as it stood at the cut: the newest in main's lineage that a
label the cut names for that target stamped (a commit of the cut or, for a
target the cut did not change, an earlier one; later commits and
compactions leave it as it is). A tag keeps its snapshot, and the files it
reads, from expiry. Only once every target carries the cut's tag does the
log table get the cut's row: the newest row of a job names a cut every
target it lists can be read at.

A cut's ``seq`` is the time it is published, in milliseconds (past the
newest logged), so a seq is never used twice: a publish that failed half-way
leaves tags that no row names and that no later cut reuses. The log keeps
the job's newest ``keep`` rows; each tag commit drops, in its target, the
job's tags that none of the rows kept names (those tags too).
"""

from __future__ import annotations

import contextlib
import datetime
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from canalbridge.sync.errors import first_line
from canalbridge.sync.model.cuts import Cut, PublishedCut
from canalbridge.sync.settings import CutSettings
from spark_sink.errors import TargetTableError
from spark_sink.identifiers import quote, split_table
from spark_sink.session import make_active
from spark_sink.stamp import PROP_JOB, PROP_LABEL
from spark_sink.table import TargetTable, ref_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = structlog.get_logger("canalbridge.cuts")

# The log table's columns, in order.
LOG_COLUMNS = (
    ("job", "STRING NOT NULL"),
    ("seq", "BIGINT NOT NULL"),  # when the cut was published, in ms: the newest has the highest
    ("tag", "STRING NOT NULL"),  # the tag every target of the cut carries at its snapshot of the cut
    ("label", "STRING NOT NULL"),  # the transaction whose commit made the cut
    ("position", "STRING NOT NULL"),  # the source position of the cut, as status shows positions
    ("execute_time", "TIMESTAMP"),  # when the source executed the last change at or before the cut
    ("published_at", "TIMESTAMP NOT NULL"),
    ("snapshots", "MAP<STRING, BIGINT> NOT NULL"),  # each target -> its snapshot at the cut
)
# Snapshots a lineage walk looks at before it gives up on finding a cut's.
MAX_WALK = 100_000
# Tries at a tag, each after a commit of the target's channel landed in between, and the pause before the next.
TAG_ATTEMPTS = 5
TAG_RETRY_S = 0.05
# How long a publish, or a read of the newest cut, waits for the one before it.
PUBLISH_WAIT_S = 600.0
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
        self._rows: list[int] | None = None  # the seqs of the job's rows in the log, ascending: read once
        self._published = 0
        self._tag = re.compile(re.escape(f"cut-{job}-") + r"(\d+)")
        self._log = log.bind(job=job)

    def latest(self) -> PublishedCut | None:
        with self._publishing():
            table = TargetTable(self._session(), self.table)
            if table.columns() is None:
                return None
            rows = table.spark.sql(f"SELECT * FROM {table.identifier} WHERE job = :job ORDER BY seq DESC LIMIT 1",
                                   args={"job": self.job}).collect()
            return None if not rows else self._row_cut(rows[0].asDict())

    def publish(self, cut: Cut) -> PublishedCut:
        with self._publishing():
            spark = self._session()
            table = self._log_table(spark)
            rows = self._logged(table)
            seq = max(int(time.time() * 1000), rows[-1] + 1 if rows else 0)
            tag = tag_name(self.job, seq)
            kept = {*rows[-(self.keep - 1):], seq}  # (keep >= 2: the newest row's tags stay while this one is made)
            snapshots = {target: self._tag_target(spark, target, labels, tag, kept)
                         for target, labels in sorted(cut.targets.items())}
            published_ms = int(time.time() * 1000)
            execute_ms = cut.position.to_dict().get("execute_time_ms")
            row = (self.job, seq, tag, cut.label, str(cut.position),
                   None if not isinstance(execute_ms, int) else _timestamp(execute_ms), _timestamp(published_ms),
                   snapshots)
            schema = ", ".join(f"{name} {kind.replace(' NOT NULL', '')}" for name, kind in LOG_COLUMNS)
            spark.createDataFrame([row], schema).writeTo(table.identifier).append()
            rows.append(seq)
            self._published += 1
            self._tidy(table, rows)
            return PublishedCut(seq, tag, cut.label, str(cut.position), snapshots, published_ms, self.table)

    @contextlib.contextmanager
    def _publishing(self) -> Iterator[None]:
        """One publish or read of the log at a time (a run's publisher left busy at a stop, and the next run's),
        waiting at most :data:`PUBLISH_WAIT_S`."""
        if not self._lock.acquire(timeout=PUBLISH_WAIT_S):
            raise TargetTableError(f"job {self.job}: a publish of its cuts has not ended in {PUBLISH_WAIT_S:.0f} s: "
                                   f"the catalog of {self.table} or of a target does not answer")
        try:
            yield
        finally:
            self._lock.release()

    def _session(self) -> SparkSession:
        spark = self._spark()
        make_active(spark)
        return spark

    def _log_table(self, spark: SparkSession) -> TargetTable:
        table = TargetTable(spark, self.table)
        if table.columns() is None:
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {'.'.join(quote(part) for part in table.parts[:-1])}")
            columns = ", ".join(f"{name} {kind}" for name, kind in LOG_COLUMNS)
            spark.sql(f"CREATE TABLE IF NOT EXISTS {table.identifier} ({columns}) USING iceberg TBLPROPERTIES "
                      f"('format-version'='2', 'write.metadata.delete-after-commit.enabled'='true', "
                      f"'write.metadata.previous-versions-max'='10')")
        return table

    def _logged(self, table: TargetTable) -> list[int]:
        if self._rows is None:
            found = table.spark.sql(f"SELECT seq FROM {table.identifier} WHERE job = :job ORDER BY seq",
                                    args={"job": self.job}).collect()
            self._rows = [int(row["seq"]) for row in found]
        return self._rows

    def _tag_target(self, spark: SparkSession, target: str, labels: frozenset[str], tag: str, kept: set[int]) -> int:
        """Tag ``target``'s snapshot of the cut, dropping the job's tags whose seq is not ``kept``, in one metadata
        commit; the snapshot's id."""
        table = TargetTable(spark, target).iceberg_table()
        table.refresh()  # (the catalog's cache may not have the cut's commit yet)
        snapshot_id = self._snapshot_at(table, target, labels)  # (an ancestor of main: it stays what it is)
        for attempt in range(1, TAG_ATTEMPTS + 1):
            with ref_lock(target):
                table.refresh()
                refs = table.refs()
                manage = table.manageSnapshots()
                if refs.containsKey(tag):  # (the same millisecond as a failed publish's tag: made again)
                    manage = manage.replaceTag(tag, snapshot_id)
                else:
                    manage = manage.createTag(tag, snapshot_id)
                for name in list(refs.keySet()):
                    match = self._tag.fullmatch(str(name))
                    if match is not None and int(match.group(1)) not in kept:
                        manage = manage.removeTag(name)
                try:
                    manage.commit()
                    break
                except Exception as exc:
                    # A commit of the channel's landed meanwhile, and Iceberg does not retry a change of refs.
                    if attempt == TAG_ATTEMPTS or "CommitFailedException" not in str(exc):
                        raise
            self._wait_before_retry(attempt)
        ref = table.refs().get(tag)
        if ref is None or not ref.isTag() or ref.snapshotId() != snapshot_id:
            raise TargetTableError(f"target {target}: the tag {tag} canalbridge just made is not in the table its "
                                   f"catalog returns: the catalog does not keep Iceberg's tags")
        return snapshot_id

    @staticmethod
    def _wait_before_retry(attempt: int) -> None:
        time.sleep(TAG_RETRY_S * attempt)  # (a back-off between tries, outside the lock)

    def _snapshot_at(self, table: Any, target: str, labels: frozenset[str]) -> int:
        """The newest snapshot in main's lineage that one of ``labels`` stamped. A commit in steps stamps its
        earlier steps ``label~n``, and a label read back after a failed commit may be one of those: the
        transaction is what counts."""
        wanted = {label.split("~")[0] for label in labels}
        snapshot = table.currentSnapshot()
        for _ in range(MAX_WALK):
            if snapshot is None:
                break
            summary = snapshot.summary()
            label = summary.get(PROP_LABEL)
            if summary.get(PROP_JOB) == self.job and label is not None and str(label).split("~")[0] in wanted:
                return int(snapshot.snapshotId())
            parent = snapshot.parentId()
            snapshot = table.snapshot(parent) if parent is not None else None
        raise TargetTableError(f"target {target}: no snapshot in main's lineage carries the commit "
                               f"{' or '.join(sorted(wanted))} of job {self.job} (expired, or main was rolled back)")

    def _tidy(self, table: TargetTable, rows: list[int]) -> None:
        """Drop the job's rows past the newest ``keep`` (their tags went with this cut's), and now and then the log
        table's old snapshots. The cut is logged already: a failure here is said and tried again next time."""
        try:
            if len(rows) > self.keep:
                table.spark.sql(f"DELETE FROM {table.identifier} WHERE job = :job AND seq < :oldest",
                                args={"job": self.job, "oldest": rows[-self.keep]}).collect()
                del rows[:-self.keep]
            if self._published % EXPIRE_EVERY == 0:
                table.iceberg_table().expireSnapshots().expireOlderThan(int(time.time() * 1000)).retainLast(
                    self.keep).commit()
        except Exception as exc:
            self._log.warning("cuts.log_not_tidied", table=self.table, error=first_line(exc))

    def _row_cut(self, row: Mapping[str, Any]) -> PublishedCut:
        return PublishedCut(int(row["seq"]), str(row["tag"]), str(row["label"]), str(row["position"]),
                            {str(k): int(v) for k, v in (row["snapshots"] or {}).items()},
                            int(row["published_at"].timestamp() * 1000), self.table)


def _timestamp(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
