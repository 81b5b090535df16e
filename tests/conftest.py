"""Shared fixtures: dev servers on loopback that are always stopped, and the one SparkSession.

The Spark fixtures live here, not in a sub-package's conftest, so that every
package that asks for them gets the same session and the same warehouse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from canalbridge.devkit import DestinationConfig, DevServer
from tests.infra.kafka_broker import KafkaBroker


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> Iterator[KafkaBroker]:
    """One real Kafka broker (KRaft, loopback) for the run; each test makes its own topics."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka")).start()
    yield broker
    broker.stop()


@pytest.fixture
def dev_server_factory() -> Iterator[Callable[..., DevServer]]:
    """Start dev servers on free ports; every one is stopped at teardown."""
    servers: list[DevServer] = []

    def start(*configs: DestinationConfig) -> DevServer:
        server = DevServer(configs or [DestinationConfig("example", "canal", "canal-secret")]).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def dev_server(dev_server_factory) -> DevServer:
    """One dev server with destination 'example', user 'canal', password 'canal-secret'."""
    return dev_server_factory()


@pytest.fixture(scope="session")
def spark_settings(tmp_path_factory):
    """Settings of the test run's SparkSession: local[2], warehouse and spill in a temp dir."""
    from spark_sink.settings import SparkSettings

    root = tmp_path_factory.mktemp("lake")
    return SparkSettings(master="local[2]", warehouse=str(root / "warehouse"), spill_dir=str(root / "spill"),
                         spill_rows=500)


@pytest.fixture(scope="session")
def spark(spark_settings):
    """The one SparkSession of the test run (started on first use)."""
    from canalbridge.daemon.logs import configure_logging
    from spark_sink.session import get_spark, stop_spark

    configure_logging("warning")
    session = get_spark(spark_settings)
    yield session
    stop_spark()
