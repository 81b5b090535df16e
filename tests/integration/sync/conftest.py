"""Sync-core tests run on the dev server and in-memory writers: no Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from canalbridge.daemon.logs import configure_logging


@pytest.fixture(autouse=True, scope="session")
def quiet_logs() -> Iterator[None]:
    configure_logging("warning")
    yield
