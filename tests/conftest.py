"""Shared fixtures (dev servers on loopback that are always stopped, the one SparkSession, a Kafka broker), the
options of every JVM a test starts, and the order in which files run.

The Spark fixtures live here, not in a sub-package's conftest, so that every
package that asks for them gets the same session and the same warehouse.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from canalbridge.devkit import DestinationConfig, DevServer
from tests.infra.kafka_broker import KafkaBroker

# Every JVM a test starts (the run's Spark, each daemon's, the benchmarks', Canal, Kafka, Flink) lives for
# seconds to minutes and runs little code often: C1 alone compiles it for a third less CPU than C1 and C2
# together, and the serial collector spends no thread on a second core (tests/integration/spark/test_daemon.py:
# 209 -> 130 CPU-seconds). What a test checks does not depend on the JIT. Production JVMs keep their defaults.
# C1 alone shrinks the code cache to 48 MB, which a worker's SparkSession filled in 7 minutes of Spark's
# generated classes (the JVM then stops compiling and Spark's tasks die): the usual 240 MB, then.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
os.environ.setdefault("JDK_JAVA_OPTIONS", TEST_JVM_OPTIONS)

# The directories whose tests take longest, first: pytest-xdist (make test) hands out files in this order, so
# a long file starts early instead of running alone at the end. The rest keep their order.
SLOW_FIRST = ("tests/integration/bench/", "tests/integration/real/cluster/", "tests/integration/real/",
              "tests/integration/faults/", "tests/integration/spark/", "tests/integration/kafka/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.path.as_posix()
        return next((i for i, directory in enumerate(SLOW_FIRST) if f"/{directory}" in path), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: each file's tests stay in their order


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> Iterator[KafkaBroker]:
    """One real Kafka broker (KRaft, loopback) for the session (each xdist worker has its own); each test makes
    its own topics."""
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
    """Settings of the session's SparkSession: local[2], warehouse and spill in a temp dir."""
    from spark_sink.settings import SparkSettings

    root = tmp_path_factory.mktemp("lake")
    return SparkSettings(master="local[2]", warehouse=str(root / "warehouse"), spill_dir=str(root / "spill"),
                         spill_rows=500)


@pytest.fixture(scope="session")
def spark(spark_settings):
    """The one SparkSession of the session (each xdist worker has its own; started on first use)."""
    from canalbridge.daemon.logs import configure_logging
    from spark_sink.session import get_spark, stop_spark

    configure_logging("warning")
    session = get_spark(spark_settings)
    yield session
    stop_spark()
