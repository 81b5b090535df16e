"""An Iceberg target's maintenance: small files compacted, old snapshots expired (never the position's)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from canalbridge.sync.channel.maintenance import MaintenanceReport
from canalbridge.sync.settings import MaintenanceSettings
from spark_sink import equality
from spark_sink.errors import SparkSetupError
from spark_sink.identifiers import sql_string
from spark_sink.stamp import read_stamp
from spark_sink.table import TargetTable
from spark_sink.writer import IcebergWriter

log = structlog.get_logger("canalbridge.spark")


class IcebergMaintainer:
    """Maintains the table a channel's writer holds (a :class:`~canalbridge.sync.channel.sink.Maintainer`), between
    two of the writer's applies."""

    def __init__(self, writer: IcebergWriter) -> None:
        self._writer = writer
        self._log = log.bind(job=writer.job, channel=writer.channel.source, target=writer.channel.target)

    def maintain(self, settings: MaintenanceSettings) -> MaintenanceReport:
        table = self._writer.live()
        if table.columns() is None:
            return MaintenanceReport()  # created with the first row
        before = live_files(table)
        compact(table, before)
        after = live_files(table)
        files = {"data_files_before": before.data, "data_files_after": after.data,
                 "delete_files_before": before.deletes, "delete_files_after": after.deletes}
        # The snapshot that carries the position, and every one after it, stay: the channel
        # reads its position from main's lineage at its next start.
        stamp = read_stamp(table, self._writer.job)
        if stamp is None:
            self._log.warning("spark.expiry_skipped", reason="main's lineage holds no position of this job")
            return MaintenanceReport(**files)
        older_than = min(int(time.time() * 1000 - settings.keep_snapshots_hours * 3_600_000), stamp.committed_ms)
        return MaintenanceReport(**files, snapshots_expired=expire_snapshots(table, older_than))


@dataclass(frozen=True)
class LiveFiles:
    """The files main's current snapshot holds, by kind."""

    data: int = 0
    position_deletes: int = 0
    equality_deletes: int = 0

    @property
    def deletes(self) -> int:
        return self.position_deletes + self.equality_deletes


def compact(table: TargetTable, files: LiveFiles | None = None) -> None:
    """Rewrite small data files and those with many deleted rows (Iceberg writes each file sorted by the
    table's sort order, if it has one), then compact position delete files and drop dangling ones (each by
    Iceberg's default thresholds). A table with equality deletes has every data file they apply to
    rewritten, and then holds none. ``files``: what :func:`live_files` just said, when the caller has it."""
    catalog, name = table.procedure_names()
    equality_deletes = (files or live_files(table)).equality_deletes > 0
    if equality_deletes:
        # An equality delete applies to every older data file, and Iceberg's thresholds never pick a file
        # for one (its delete ratio counts deletes scoped to one file): left alone, they pile up. Every file
        # they touch rewritten, they are all dangling, and removed below. Not by Iceberg's own removal: it
        # matches a delete to the data files of its own spec, and would drop a partitioned target's deletes
        # (under an unpartitioned spec that holds no data file) even where one committed since still applies.
        options = {"delete-file-threshold": "1"}
    else:
        options = {"remove-dangling-deletes": "true"}
    pairs = ", ".join(f"{sql_string(key)}, {sql_string(value)}" for key, value in options.items())
    table.spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => {name}, "
                    f"options => map({pairs}))").collect()
    if equality_deletes:
        try:
            equality.remove_dangling_deletes(table.spark, table.identifier)
        except SparkSetupError:
            pass  # (written by another tool, and no canalbridge jar: they stay, applying to no file)
    table.spark.sql(f"CALL {catalog}.system.rewrite_position_delete_files(table => {name})").collect()


def live_files(table: TargetTable) -> LiveFiles:
    """main's live files, by kind."""
    rows = table.spark.sql(f"SELECT content, count(*) AS n FROM {table.identifier}.files GROUP BY content").collect()
    counts = {int(row["content"]): int(row["n"]) for row in rows}  # Iceberg's content: 0 data, 1 and 2 deletes
    return LiveFiles(counts.get(0, 0), counts.get(1, 0), counts.get(2, 0))


def expire_snapshots(table: TargetTable, older_than_ms: int) -> int:
    """Expire the snapshots committed before ``older_than_ms`` that no branch or tag holds (and
    the files only they need); the number expired."""
    catalog, name = table.procedure_names()
    # Iceberg takes a timestamp literal in the session's zone: let Spark render it. (In an
    # hour that a zone repeats, the literal reads as the earlier instant: older, never newer.)
    older_than = table.spark.sql(f"SELECT CAST(timestamp_millis({int(older_than_ms)}) AS STRING) AS t").first()
    assert older_than is not None
    before = _snapshot_count(table)
    table.spark.sql(f"CALL {catalog}.system.expire_snapshots(table => {name}, "
                    f"older_than => TIMESTAMP {sql_string(older_than['t'])})").collect()
    return before - _snapshot_count(table)


def _snapshot_count(table: TargetTable) -> int:
    row = table.spark.sql(f"SELECT count(*) AS n FROM {table.identifier}.snapshots").first()
    return int(row["n"]) if row else 0
