"""The Receiver: the thread that drives the conversation with Canal.

It (re)connects with exponential back-off and then runs
:meth:`CanalLink.exchange` in a loop, which acks, rolls back and gets
batches (see ``canal_link``). Connection errors anywhere make it disconnect
and go round again. After ``reconnect_attempts`` failed attempts in a row it
gives up and reports, as it does when Canal keeps serving batches that
cannot be proven contiguous.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog
from tenacity import RetryError

from canalbridge.canal import CanalError
from canalbridge.sync.canal_link import CanalLink
from canalbridge.sync.errors import ReceiverGaveUp, SyncError
from canalbridge.sync.retry import Stopping, retrying
from canalbridge.sync.settings import RetrySettings
from canalbridge.sync.worker import Worker

log = structlog.get_logger("canalbridge.receiver")

ROOM_WAIT_S = 0.5  # how often a receiver waiting for queue room checks for stop


class Receiver(Worker):
    """Owns the thread that fills the link's queue."""

    def __init__(self, job: str, link: CanalLink, reconnect: RetrySettings, stop: threading.Event,
                 on_failure: Callable[[SyncError], None]) -> None:
        super().__init__(f"receiver-{job}", stop)
        self.link = link
        self.reconnect = reconnect
        self._on_failure = on_failure
        self._log = log.bind(job=job, canal=link.canal.address, destination=link.canal.destination)
        self.batches_received = 0

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self.link.connected:
                    self._connect()
                if not self.link.wait_for_room(ROOM_WAIT_S):
                    continue
                self._exchange()
        except Stopping:
            pass
        except SyncError as exc:
            self._log.error("receiver.gave_up", error=str(exc))
            self._on_failure(exc)
        self._log.info("receiver.stopped", batches=self.batches_received)

    def _exchange(self) -> None:
        try:
            batch = self.link.exchange()
        except CanalError as exc:
            if self._stop.is_set():
                raise Stopping() from exc
            self._log.warning("receiver.connection_failed", error=str(exc))
            self.link.connector.disconnect()
            return
        if batch is not None:
            self.batches_received += 1
            if self.link.canal.debug:
                self._log.debug("receiver.batch", batch=batch.batch_id, entries=len(batch.entries),
                                bytes=batch.raw_size)
        # An empty batch needs no back-off of our own: the server already
        # waited poll_timeout_ms for data before answering.

    def _connect(self) -> None:
        def attempt() -> None:
            if self._stop.is_set():
                raise Stopping()
            self.link.open()

        try:
            retrying(self.reconnect, CanalError, self._stop, self._log, "receiver.reconnect_failed")(attempt)
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise ReceiverGaveUp(self.link.canal.address, self.reconnect.attempts, cause or exc) from cause
