"""Table maintenance on a schedule: when a channel runs it, and what its last run did.

A long merge-on-read sync leaves many small data files, delete files and
snapshots behind. Each channel runs its writer's maintenance on its own
thread, right after one of its commits once ``interval_minutes`` have
passed, so maintenance never races the channel's commits; the commit's
result is already with the Consumer, so it never holds an ack back. What
maintenance does is the sink's business (:meth:`~canalbridge.sync.channel.sink.Maintainer.maintain`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from canalbridge.sync.model.clock import utc_text
from canalbridge.sync.settings import MaintenanceSettings


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance run did to a target."""

    data_files_before: int = 0
    data_files_after: int = 0
    delete_files_before: int = 0
    delete_files_after: int = 0
    snapshots_expired: int = 0

    def __str__(self) -> str:
        return (f"data files {self.data_files_before} -> {self.data_files_after}, delete files "
                f"{self.delete_files_before} -> {self.delete_files_after}, {self.snapshots_expired} snapshots expired")


@dataclass(frozen=True)
class MaintenanceRun:
    """The outcome of a channel's latest maintenance run, for status."""

    time_ms: int
    seconds: float
    report: MaintenanceReport | None  # None when it failed
    error: str | None = None

    def describe(self) -> str:
        when = utc_text(self.time_ms)
        outcome = f"failed: {self.error}" if self.report is None else str(self.report)
        return f"{when} ({self.seconds:.1f} s): {outcome}"


class MaintenanceSchedule:
    """When a channel's target is next due; owned by the channel's thread."""

    def __init__(self, settings: MaintenanceSettings, now: float) -> None:
        self.settings = settings
        self._interval_s = settings.interval_minutes * 60
        self._next = now + self._interval_s if settings.enabled else math.inf

    def due(self, now: float) -> bool:
        return now >= self._next

    def ran(self, now: float) -> None:
        """A run ended (well or not): the next is one interval later, so a failing one is not hammered."""
        self._next = now + self._interval_s
