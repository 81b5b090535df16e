"""Session fixtures of the real stack: one private MariaDB and one real Canal server for the whole run.

They fail (not skip) when an artifact is missing: ``make test`` fetches them
(``make real-stack``), and the error names the make target. Each test takes
its own database and destination from :func:`real_destination`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest

from tests.infra.canal_server import CanalDestination, CanalServer
from tests.infra.mariadb import MariaDBServer


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory) -> Iterator[MariaDBServer]:
    """A private MariaDB 10.11 on a free loopback port, binlog in ROW format."""
    server = MariaDBServer(tmp_path_factory.mktemp("mariadb")).start()
    yield server
    server.stop()


_SESSION_CANAL: list[CanalServer] = []  # the session's Canal once a test asked for it
_KEPT = "warmup"


@pytest.fixture(scope="session")
def canal(tmp_path_factory, mariadb) -> Iterator[CanalServer]:
    """A real Canal server reading ``mariadb``, client user ``canal`` with a password."""
    server = CanalServer(
        tmp_path_factory.mktemp("canal"),
        mariadb,
        [CanalDestination(_KEPT, filter_regex=r"warmup\..*")],
        password="canal-client-secret",
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
