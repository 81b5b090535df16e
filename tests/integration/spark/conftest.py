"""Tests that start the shared SparkSession (fixtures ``spark``/``spark_settings`` in tests/conftest.py)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
