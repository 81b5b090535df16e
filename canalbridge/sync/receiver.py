"""The Receiver: takes batches from Canal with getWithoutAck and queues them for the Consumer.

It (re)connects with exponential back-off: connect, subscribe with the
channels' filter, then roll Canal back so the get cursor returns to the ack
cursor, and starts a new epoch so the Consumer drops whatever it held.
Connection errors anywhere make it disconnect and go round again. After
``reconnect_attempts`` failed attempts in a row it gives up and reports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from canalbridge.canal import CanalConnector, CanalError
from canalbridge.sync.batch_queue import BatchQueue
from canalbridge.sync.errors import ReceiverGaveUp, SyncError
from canalbridge.sync.settings import CanalSettings, CommitSettings

log = structlog.get_logger("canalbridge.receiver")

ROOM_WAIT_S = 0.5  # how often a receiver waiting for queue room checks for stop


class _Stopping(Exception):
    """Raised inside a retry loop when the job is stopping."""


class Receiver:
    """Owns the get side of the connector and a thread that fills the queue."""

    def __init__(
        self,
        job: str,
        connector: CanalConnector,
        batches: BatchQueue,
        canal: CanalSettings,
        commit: CommitSettings,
        subscribe_filter: str,
        stop: threading.Event,
        on_failure: Callable[[SyncError], None],
    ) -> None:
        self.job = job
        self.connector = connector
        self.batches = batches
        self.canal = canal
        self.commit = commit
        self.subscribe_filter = subscribe_filter
        self._stop = stop
        self._on_failure = on_failure
        self._thread: threading.Thread | None = None
        self._log = log.bind(job=job, canal=canal.address, destination=canal.destination)
        self.batches_received = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"receiver-{self.job}", daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait for the thread; the caller has set the stop event (and may disconnect to wake a get)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self.connector.connected:
                    self._reconnect()
                if not self.batches.wait_for_room(ROOM_WAIT_S):
                    continue
                self._get_one()
        except _Stopping:
            pass
        except ReceiverGaveUp as exc:
            self._log.error("receiver.gave_up", error=str(exc))
            self._on_failure(exc)
        self._log.info("receiver.stopped", batches=self.batches_received)

    def _get_one(self) -> None:
        try:
            with self.batches.get_lock:
                batch = self.connector.get_without_ack(self.canal.batch_size, self.canal.poll_timeout_ms)
                if not batch.is_empty:
                    self.batches.put(batch)
        except CanalError as exc:
            if self._stop.is_set():
                raise _Stopping() from exc
            self._log.warning("receiver.get_failed", error=str(exc))
            self.connector.disconnect()
            return
        if not batch.is_empty:
            self.batches_received += 1
            if self.canal.debug:
                self._log.debug(
                    "receiver.batch", batch=batch.batch_id, entries=len(batch.entries), bytes=batch.raw_size
                )
        # An empty batch needs no back-off of our own: the server already
        # waited poll_timeout_ms for data before answering.

    def _reconnect(self) -> None:
        retrying = Retrying(
            stop=stop_after_attempt(self.commit.reconnect_attempts),
            wait=wait_exponential(multiplier=self.commit.retry_initial_seconds, max=self.commit.retry_max_seconds),
            retry=retry_if_exception_type(CanalError),
            sleep=self._sleep,
            before_sleep=lambda state: self._log.warning(
                "receiver.reconnect_failed",
                attempt=state.attempt_number,
                retry_in_s=round(state.next_action.sleep, 2) if state.next_action else None,
                error=str(state.outcome.exception()) if state.outcome else None,
            ),
        )
        try:
            retrying(self._connect_once)
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise ReceiverGaveUp(self.canal.address, self.commit.reconnect_attempts, cause or exc) from cause

    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise _Stopping()

    def _connect_once(self) -> None:
        if self._stop.is_set():
            raise _Stopping()
        self.connector.disconnect()
        self.connector.connect()
        self.connector.subscribe(self.subscribe_filter)
        with self.batches.get_lock, self.batches.epoch_lock:
            # Canal keeps un-acked batches across connections: return the get
            # cursor to the ack cursor and make the Consumer drop what it holds.
            self.connector.rollback()
            epoch = self.batches.new_epoch()
        self._log.info("receiver.connected", epoch=epoch, filter=self.subscribe_filter)
