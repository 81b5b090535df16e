"""The one retry mechanism of the sync core: tenacity, with back-off that a stopping job interrupts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from canalbridge.sync.errors import Stopping
from canalbridge.sync.settings import RetrySettings


def retrying(
    settings: RetrySettings,
    retry_on: Callable[[BaseException], bool] | type[BaseException],
    stop: threading.Event,
    logger: Any,
    event: str,
    on_retry: Callable[[], None] | None = None,
) -> Retrying:
    """A tenacity ``Retrying`` that logs ``event`` before each wait and raises :class:`Stopping` on stop.

    ``retry_on`` is an exception class or a predicate; any other exception
    is raised at once. When the attempts run out, tenacity raises
    ``RetryError`` with the last attempt.
    """
    predicate = retry_on if not isinstance(retry_on, type) else (lambda exc: isinstance(exc, retry_on))

    def sleep(seconds: float) -> None:
        if stop.wait(seconds):
            raise Stopping()

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None:
            on_retry()
        logger.warning(
            event,
            attempt=state.attempt_number,
            retry_in_s=round(state.next_action.sleep, 2) if state.next_action else None,
            error=str(state.outcome.exception()) if state.outcome else None,
        )

    return Retrying(
        stop=stop_after_attempt(settings.attempts),
        wait=wait_exponential(multiplier=settings.initial_seconds, max=settings.max_seconds),
        retry=retry_if_exception(predicate),
        sleep=sleep,
        before_sleep=before_sleep,
    )
