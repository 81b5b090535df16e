"""Consistent cuts across a job's targets: on a schedule, the newest cut every target holds, tagged and logged.

When a commit through a cut that splits no source transaction has landed in
every channel, every target of the job holds the source as it stood at that
cut, and goes on holding it in its history after later commits. The
Consumer offers each such cut (:meth:`CutPublisher.offer`); the publisher's
thread takes the newest once ``interval_seconds`` have passed since the last
it published (or since it started) and hands it to the job's
:class:`CutLog`, which tags each target's snapshot of that cut and logs the
cut where readers find it. A cut that cannot be published (a catalog that
refuses) is logged and passed over: the sync goes on, and readers keep the
last cut logged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from canalbridge.sync.errors import first_line
from canalbridge.sync.model.cuts import Cut, PublishedCut
from canalbridge.sync.settings import CutSettings
from canalbridge.sync.worker import STOP_CHECK_S, Worker

log = structlog.get_logger("canalbridge.cuts")


class CutLog(Protocol):
    """The sink's side: tags the targets at a cut and logs it (``spark_sink.cuts`` for Iceberg)."""

    def latest(self) -> PublishedCut | None:
        """The newest cut of the job the log holds (None: none yet)."""

    def publish(self, cut: Cut) -> PublishedCut:
        """Tag every target of ``cut`` at its snapshot of the cut, drop the job's tags older than the kept ones,
        then log the cut; raise if any of it fails (the log then names no cut it did not tag whole)."""


class CutPublisher(Worker):
    """The thread that publishes the newest whole cut on the schedule. ``offer`` is called from the Consumer;
    ``last`` and ``error`` are read by status (each replaced whole)."""

    def __init__(self, job: str, cut_log: CutLog, settings: CutSettings, stop: threading.Event,
                 on_published: Callable[[PublishedCut], None], clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(f"cuts-{job}", stop)
        self._cut_log = cut_log
        self._interval_s = settings.interval_seconds
        self._on_published = on_published
        self._clock = clock
        self._changed = threading.Condition()
        self._offered: Cut | None = None  # the newest cut offered and not taken
        self._due = clock() + settings.interval_seconds
        self.error: str | None = None  # why the last cut taken was not published
        self._log = log.bind(job=job)

    def offer(self, cut: Cut) -> None:
        """The newest whole cut (one offered before and not taken yet is passed over)."""
        with self._changed:
            self._offered = cut
            self._changed.notify()

    def _take(self) -> Cut | None:
        """The newest cut offered, once one is and the schedule says so; None when the job stops."""
        with self._changed:
            while not self._stop.is_set():
                wait = self._due - self._clock()
                if self._offered is not None and wait <= 0:
                    cut, self._offered = self._offered, None
                    return cut
                self._changed.wait(STOP_CHECK_S if wait <= 0 else min(wait, STOP_CHECK_S))
        return None

    def _run(self) -> None:
        try:
            latest = self._cut_log.latest()
        except Exception as exc:  # status shows none until one is published
            self._log.warning("cuts.log_unreadable", error=first_line(exc))
        else:
            if latest is not None:
                self._on_published(latest)
        while (cut := self._take()) is not None:
            started = self._clock()
            try:
                published = self._cut_log.publish(cut)
            except Exception as exc:  # the sync goes on; readers keep the last cut logged
                self.error = f"cut {cut.label} at {cut.position}: {first_line(exc)}"
                self._log.warning("cuts.publish_failed", label=cut.label, position=str(cut.position),
                                  error=first_line(exc))
            else:
                self.error = None
                self._on_published(published)
                self._log.info("cuts.published", tag=published.tag, label=cut.label, position=published.position,
                               targets=len(published.snapshots), seconds=round(self._clock() - started, 3))
            self._due = started + self._interval_s  # (start to start: a slow publish does not push the next)
