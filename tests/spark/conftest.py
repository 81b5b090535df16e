"""One SparkSession for the whole test run (local[2], warehouse in a temp dir)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from canalbridge.logs import configure_logging
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings


@pytest.fixture(scope="session")
def spark_settings(tmp_path_factory) -> SparkSettings:
    root = tmp_path_factory.mktemp("lake")
    return SparkSettings(master="local[2]", warehouse=str(root / "warehouse"), spill_dir=str(root / "spill"),
                         spill_rows=500)


@pytest.fixture(scope="session")
def spark(spark_settings) -> Iterator[object]:
    configure_logging("warning")
    session = get_spark(spark_settings)
    yield session
    stop_spark()


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
