"""How a snapshot rides out a source that goes away: each attempt goes on from the last chunk that landed, and
the attempts are counted in a row, anew once a chunk landed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tenacity import RetryError

from canalbridge.source_db import SourceDbConnectionError
from canalbridge.sync.errors import SnapshotError, Stopping
from canalbridge.sync.retry import retrying
from canalbridge.sync.settings import RetrySettings


def run_reconnecting(attempt: Callable[[], None], landed: Callable[[], int], settings: RetrySettings,
                     stop: threading.Event, log: Any, table: Callable[[], str]) -> None:
    """Run ``attempt`` (one connection's worth of work) until it returns, again after each
    :class:`SourceDbConnectionError`: up to ``settings.attempts`` times in a row, counted anew once ``landed()``
    (the chunks landed so far) grew during one. :class:`SnapshotError` naming ``table()`` (the table being read)
    once they ran out; :class:`Stopping` on a stop."""

    def once() -> None:
        before = landed()
        try:
            attempt()
        except SourceDbConnectionError as exc:
            if landed() > before and settings.attempts > 1:
                raise _Progressed(exc) from exc
            raise

    while True:
        try:
            retrying(settings, SourceDbConnectionError, stop, log, "snapshot.source_lost")(once)
            return
        except _Progressed as exc:
            wait = settings.initial_seconds
            log.warning("snapshot.source_lost", attempt=1, retry_in_s=wait, error=str(exc.cause))
            if stop.wait(wait):
                raise Stopping() from None
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            assert isinstance(cause, SourceDbConnectionError)
            said = f"source database {cause.address}: {cause.reason}" + (
                f" (tried {settings.attempts} times in a row: resume once it answers)" if settings.attempts > 1
                else "")
            raise SnapshotError(table() or cause.table or "", said) from cause


class _Progressed(Exception):
    """The source went away after chunks landed in the attempt: its attempts begin anew."""

    def __init__(self, cause: SourceDbConnectionError) -> None:
        super().__init__(str(cause))
        self.cause = cause
