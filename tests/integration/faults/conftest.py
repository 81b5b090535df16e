"""The fault suite: run alone with ``pytest -m faults`` (it is part of ``make test`` too)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/faults/" in str(item.fspath):
            item.add_marker(pytest.mark.faults)
