"""Kafka tests share the run's broker (tests/conftest.py); each makes its own topic."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from canalbridge.daemon.logs import configure_logging
from tests.infra.kafka_broker import KafkaBroker

_names = itertools.count(1)


@pytest.fixture
def topic(kafka_broker: KafkaBroker) -> Callable[[int], str]:
    """Make a fresh topic with N partitions; returns its name."""

    def make(partitions: int = 1) -> str:
        name = f"canal-{next(_names)}"
        kafka_broker.create_topic(name, partitions)
        return name

    return make


@pytest.fixture(autouse=True, scope="session")
def quiet_logs() -> Iterator[None]:
    configure_logging("warning")
    yield
