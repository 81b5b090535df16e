"""The Receiver: the thread that drives the conversation with the source (Canal over TCP, or Kafka).

It (re)connects with exponential back-off and then runs the link's
``exchange`` in a loop, which acks, rolls back and reads batches (see
:mod:`canalbridge.sync.source.canal.link` and
:mod:`canalbridge.sync.source.kafka.link`). Connection errors anywhere make
it disconnect and go round again. After ``reconnect_attempts`` failed attempts
in a row it gives up and reports, as it does at once on an error that
retrying cannot help (Canal serving batches that cannot be proven
contiguous, a Kafka record that is not a Canal message, a missing topic).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog
from tenacity import RetryError

from canalbridge.sync.errors import ReceiverGaveUp, Stopping, SyncError
from canalbridge.sync.model.stats import ReceiverStats
from canalbridge.sync.retry import retrying
from canalbridge.sync.settings import RetrySettings
from canalbridge.sync.source.link import ReceiverSide
from canalbridge.sync.worker import STOP_CHECK_S, Worker

log = structlog.get_logger("canalbridge.receiver")


class Receiver(Worker):
    """Owns the thread that fills the link's queue."""

    def __init__(self, job: str, link: ReceiverSide, reconnect: RetrySettings, stop: threading.Event,
                 on_failure: Callable[[SyncError], None], *, debug: bool = False,
                 stats: ReceiverStats | None = None) -> None:
        super().__init__(f"receiver-{job}", stop)
        self.link = link
        self.reconnect = reconnect
        self.debug = debug
        self._on_failure = on_failure
        self._log = log.bind(job=job, source=link.description)
        self.batches_received = 0
        self.stats = stats if stats is not None else ReceiverStats()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self.link.connected:
                    self._connect()
                if not self.link.wait_for_room(STOP_CHECK_S):
                    continue
                self._exchange()
        except Stopping:
            pass
        except SyncError as exc:
            self._log.error("receiver.gave_up", error=str(exc))
            self._on_failure(exc)
        finally:
            self.link.disconnect()
        self._log.info("receiver.stopped", batches=self.batches_received)

    def _exchange(self) -> None:
        try:
            received = self.link.exchange()
        except self.link.connection_errors as exc:
            if not getattr(exc, "transient", True):
                raise  # a SyncError retrying cannot help
            if self._stop.is_set():
                raise Stopping() from exc
            self._log.warning("receiver.connection_failed", error=str(exc))
            self.stats.connections_lost += 1
            self.link.disconnect()
            return
        self.stats.last_heard = time.monotonic()
        if received:
            self.batches_received += 1
            if self.debug:  # a Canal batch, or how many entries a Kafka poll queued
                entries = getattr(received, "entries", None)
                self._log.debug("receiver.batch", batch=getattr(received, "batch_id", None),
                                entries=len(entries) if entries is not None else received,
                                bytes=getattr(received, "raw_size", None))
        # An empty batch needs no back-off of our own: the server already
        # waited poll_timeout_ms for data before answering.

    def _connect(self) -> None:
        def attempt() -> None:
            if self._stop.is_set():
                raise Stopping()
            self.link.open()

        def retried(exc: BaseException) -> bool:
            return isinstance(exc, self.link.connection_errors) and getattr(exc, "transient", True)

        try:
            retrying(self.reconnect, retried, self._stop, self._log, "receiver.reconnect_failed")(attempt)
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise ReceiverGaveUp(self.link.description, self.reconnect.attempts, cause or exc) from cause
