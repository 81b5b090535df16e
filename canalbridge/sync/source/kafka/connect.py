"""Connecting a Kafka-mode job's consumer (kafka-python), with errors that say what to fix.

kafka-python retries a refused SASL login until its bootstrap times out and
then raises "Unable to bootstrap"; the refusal itself is only logged. So
the connection listens to kafka-python's log while it bootstraps
(:class:`_RefusedLogins`), and a refused login pauses the job at once,
naming the brokers' reason, instead of being retried as a network fault.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from canalbridge.sync.errors import KafkaSourceError
from canalbridge.sync.source.kafka.settings import KafkaSettings

# How often the end offsets are read (for the lag in status); it also notices brokers that went away,
# which kafka-python's poll does not report (it returns nothing and keeps reconnecting).
END_OFFSETS_EVERY_S = 5.0


def connect(settings: KafkaSettings, factory: Callable[..., Any] | None = None) -> Any:
    """A kafka-python consumer for ``settings`` (``factory``: KafkaConsumer, or a test's), not yet assigned.

    Raises :class:`KafkaSourceError`: transient when the brokers cannot be
    reached, not when the settings are wrong or the brokers refused the
    credentials.
    """
    from kafka import KafkaConsumer
    from kafka.errors import KafkaConfigurationError, KafkaError

    description = settings.description
    with _RefusedLogins(settings.bootstrap_servers) as refused:
        try:
            return (factory or KafkaConsumer)(
                bootstrap_servers=list(settings.bootstrap_servers), group_id=settings.group_id,
                # "none": an offset out of range raises instead of jumping (every seek here is explicit).
                client_id=settings.client_id, enable_auto_commit=False, auto_offset_reset="none",
                max_poll_records=settings.max_poll_records, bootstrap_timeout_ms=settings.request_timeout_ms,
                # The topic's metadata as often as the end offsets are read, so that an added partition is seen.
                metadata_max_age_ms=int(END_OFFSETS_EVERY_S * 1000),
                **dict(settings.security),
            )
        except (KafkaConfigurationError, ValueError, OSError) as exc:  # OSError: an unreadable SSL file
            raise KafkaSourceError(description, f"the consumer settings are wrong: {describe(exc)}",
                                   transient=False) from exc
        except KafkaError as exc:
            if refused.reason is not None:  # retrying the same credentials cannot help
                raise KafkaSourceError(description, f"the brokers refused the credentials: {refused.reason}",
                                       transient=False) from exc
            # The broker closes a refused login's connection; kafka-python sees the refusal only
            # when it reads the reply first, else a lost connection, the same as a network fault.
            hint = " (with SASL: check the credentials too)" if "sasl_mechanism" in settings.security else ""
            raise KafkaSourceError(description, f"cannot connect: {describe(exc)}{hint}") from exc


class _RefusedLogins(logging.Handler):
    """While a consumer bootstraps, the brokers' refusal of its login, as kafka-python logs it.

    kafka-python does not raise a refused SASL login: it retries the bootstrap
    until it times out and raises "Unable to bootstrap", logging each refusal
    (without the password). This keeps the last refusal that names one of the
    job's brokers, so the job can say why it cannot connect.
    """

    def __init__(self, servers: Sequence[str]) -> None:
        super().__init__(logging.WARNING)
        self._servers = tuple(servers)
        self.reason: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "AuthenticationFailed" in message and (
                record.name.startswith("kafka.net.manager") or any(server in message for server in self._servers)):
            start = message.find("Authentication failed")
            reason = message[start:] if start >= 0 else message[message.index("AuthenticationFailed") - 4:]
            self.reason = reason.split("(backoff")[0].strip(" ()[")

    def __enter__(self) -> _RefusedLogins:
        logging.getLogger("kafka").addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("kafka").removeHandler(self)


def describe(exc: BaseException) -> str:
    """kafka-python's error, named; its messages never hold the SASL password."""
    text = str(exc)
    name = type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}" if text else name
