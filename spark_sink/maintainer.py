"""An Iceberg target's maintenance: small files compacted, old snapshots expired (never the position's)."""

from __future__ import annotations

import time

import structlog

from canalbridge.sync.channel.maintenance import MaintenanceReport
from canalbridge.sync.settings import MaintenanceSettings
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
        before = table.live_files()
        table.compact(before)
        after = table.live_files()
        files = {"data_files_before": before.data, "data_files_after": after.data,
                 "delete_files_before": before.deletes, "delete_files_after": after.deletes}
        # The snapshot that carries the position, and every one after it, stay: the channel
        # reads its position from main's lineage at its next start.
        stamp = table.stamp(self._writer.job)
        if stamp is None:
            self._log.warning("spark.expiry_skipped", reason="main's lineage holds no position of this job")
            return MaintenanceReport(**files)
        older_than = min(int(time.time() * 1000 - settings.keep_snapshots_hours * 3_600_000), stamp.committed_ms)
        return MaintenanceReport(**files, snapshots_expired=table.expire_snapshots(older_than))
