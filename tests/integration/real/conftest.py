"""Session fixtures of the real stack: one private MariaDB and one real Canal server per session (xdist worker).

They fail (not skip) when an artifact is missing: ``make test`` fetches them
(``make real-stack``), and the error names the make target. Each test takes
its own database and destination from :func:`real_destination`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest

from tests.infra.canal_server import HISTORY_MYSQL, CanalDestination, CanalServer, KafkaMode
from tests.infra.kafka_broker import KafkaBroker
from tests.infra.mariadb import MariaDBServer
from tests.infra.tls import make_certificates


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory) -> Iterator[MariaDBServer]:
    """A private MariaDB 10.11 on a free loopback port, binlog in ROW format, offering TLS with a certificate
    its own CA signed (``server.tls.ca``) to clients that ask for it."""
    root = tmp_path_factory.mktemp("mariadb")
    server = MariaDBServer(root, tls=make_certificates(root / "tls")).start()
    yield server
    server.stop()


_SESSION_CANAL: list[CanalServer] = []  # the session's Canal once a test asked for it
_KEPT = "warmup"


@pytest.fixture(scope="session")
def history_db(tmp_path_factory) -> Iterator[MariaDBServer]:
    """A second private MariaDB, where the session's Canal keeps its schema history: Canal's writes to it
    stay out of the binlog the tests read."""
    server = MariaDBServer(tmp_path_factory.mktemp("history-db")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def canal(tmp_path_factory, mariadb, history_db) -> Iterator[CanalServer]:
    """A real Canal server reading ``mariadb``, client user ``canal`` with a password, its schema history on.

    The history is kept in MariaDB (``mysql-tsdb.xml``), not in Canal's default H2 files: tests SIGKILL
    this server, and H2 2.1.210 was seen corrupted by that ("Row not found in primary index", after
    which the destination never starts again). The DDL tests run H2 on servers of their own.
    """
    server = CanalServer(
        tmp_path_factory.mktemp("canal"),
        mariadb,
        [CanalDestination(_KEPT, filter_regex=r"warmup\..*")],
        password="canal-client-secret",
        history=HISTORY_MYSQL,
        history_db=history_db,
    ).start()
    _SESSION_CANAL.append(server)
    yield server
    _SESSION_CANAL.remove(server)
    server.stop()


@pytest.fixture(scope="module", autouse=True)
def retire_destinations() -> Iterator[None]:
    """The destinations a module added leave the session's Canal at its next restart once the module ends
    (the next module's first destination restarts it): no parser keeps reading the binlog for nobody."""
    yield
    for server in _SESSION_CANAL:
        for name in [name for name in server.destinations if name != _KEPT]:
            server.retire(name)


@pytest.fixture
def real_destination(canal, mariadb) -> Callable[..., CanalDestination]:
    """Make a fresh database NAME, run ``setup`` SQL in it, then add a Canal destination NAME reading only it.

    Canal restarts to load the destination. Its start position is pinned
    after the set-up SQL, so the test sees only what it writes from then on.
    """

    def make(name: str, setup: Sequence[str] = (), properties: Mapping[str, str] | None = None) -> CanalDestination:
        mariadb.create_database(name)
        if setup:
            mariadb.execute(*setup, database=name)
        destination = CanalDestination(name, filter_regex=rf"{name}\..*", properties=dict(properties or {}))
        canal.add_destination(destination)
        return destination

    return make


@pytest.fixture
def kafka_canal(tmp_path_factory, mariadb: MariaDBServer,
                kafka_broker: KafkaBroker) -> Iterator[Callable[..., CanalServer]]:
    """Start a Canal publishing database NAME into a new topic NAME (after its tables exist)."""
    servers: list[CanalServer] = []

    def start(name: str, *, flat: bool, partitions: int = 1, hash_rule: str = "",
              server_properties: dict[str, str] | None = None) -> CanalServer:
        kafka_broker.create_topic(name, partitions)
        properties = {"canal.mq.topic": name}
        if partitions > 1:
            properties.update({"canal.mq.partitionsNum": str(partitions), "canal.mq.partitionHash": hash_rule})
        destination = CanalDestination(name, filter_regex=rf"{name}\..*", properties=properties)
        server = CanalServer(tmp_path_factory.mktemp(f"canal-{name}"), mariadb, [destination], heap_max="384m",
                             server_properties=server_properties,
                             kafka=KafkaMode(kafka_broker.bootstrap, flat_message=flat)).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
