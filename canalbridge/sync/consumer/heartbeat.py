"""Heartbeats: proof, by binlog order, that the source transaction the stream left open has ended.

Canal drops the TRANSACTIONEND of a transaction whose last statement its
filter took out (docs/design/delivery-semantics.md#source-transactions). On
a quiet source nothing then tells the Consumer that the transaction is over,
and a due commit would wait ``max_source_txn_wait_seconds`` and commit as a
split. A row written into the signal table now is in the binlog after every
transaction committed so far, and its own transaction's end reaches the
stream (the signal table is inside Canal's filter). When that end arrives,
whatever the stream held open before it has ended: the commit cuts there,
whole, and the ack reaches the heartbeat. The Consumer asks for a heartbeat;
this worker writes it on its own connection, so that no SQL runs on the
Consumer's thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from canalbridge.source_db import SignalTable, SourceDb
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.worker import STOP_CHECK_S, Worker

log = structlog.get_logger(__name__)

# At most one heartbeat this often: each is a write to the source, and one is enough until its end arrives.
BEAT_EVERY_S = 1.0


class Heartbeat(Worker):
    """Writes the job's heartbeat row into the signal table when asked (:meth:`request`), at most once per
    :data:`BEAT_EVERY_S`. A write that fails is logged and tried again at the next request: without
    heartbeats, the Consumer's wait bound still ends the wait. Nothing waits for this thread: a stop that
    finds it inside a write (a lock, a lost link) leaves it behind, and a late heartbeat harms nothing."""

    def __init__(self, job: str, connect: Callable[[], SourceDb], signal_table: TableId,
                 stop: threading.Event) -> None:
        super().__init__(f"{job}-heartbeat", stop)
        self.job = job
        self._connect = connect
        self._table = signal_table
        self._wanted = threading.Event()
        self.written = 0  # heartbeats written in this run
        self._log = log.bind(job=job, table=signal_table.qualified)

    def request(self) -> None:
        """Ask for a heartbeat (from the Consumer's thread: never blocks)."""
        self._wanted.set()

    def _run(self) -> None:
        db: SourceDb | None = None
        failing = False
        try:
            while not self._stop.is_set():
                if not self._wanted.wait(STOP_CHECK_S):
                    continue
                self._wanted.clear()
                try:
                    if db is None:
                        db = self._connect()
                    SignalTable(db, *self._table).beat(self.job, int(time.time() * 1000))
                except Exception as exc:  # (SourceDbError, or anything else: the worker must live on)
                    if not failing:  # one line per outage, not per attempt
                        self._log.warning("heartbeat.failed", error=str(exc), kind=type(exc).__name__)
                    failing = True
                    if db is not None:
                        db.close()
                        db = None
                else:
                    if failing:
                        self._log.info("heartbeat.writing_again")
                    failing = False
                    self.written += 1
                    self._log.debug("heartbeat.written", count=self.written)
                self._stop.wait(BEAT_EVERY_S)
        finally:
            if db is not None:
                db.close()
