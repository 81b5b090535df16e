"""Shared fixtures: dev servers on loopback that are always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from canalbridge.devserver import DestinationConfig, DevServer


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
