"""Run a Spark write with custom Iceberg snapshot-summary properties.

Iceberg's ``CommitMetadata.withCommitProperties(map, callable, exceptionClass)``
sets properties on every commit made while the callable runs on that JVM
thread. The callable here is a Python object implementing
``java.util.concurrent.Callable`` through py4j's callback server (started
with the session). This is how a SQL ``MERGE INTO`` gets the channel's
binlog position into the same snapshot as its data: the session setting
``spark.sql.iceberg.snapshot-property.*`` is not honoured for SQL writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class _JavaCallable:
    """A py4j proxy for java.util.concurrent.Callable that keeps the Python error."""

    def __init__(self, action: Callable[[], None]) -> None:
        self._action = action
        self.error: BaseException | None = None

    def call(self) -> None:
        try:
            self._action()
        except BaseException as exc:
            self.error = exc
            raise
        return None

    class Java:
        implements = ("java.util.concurrent.Callable",)  # py4j reads this; a tuple cannot be mutated


def with_commit_properties(spark: SparkSession, properties: Mapping[str, str], action: Callable[[], None]) -> None:
    """Run ``action`` (which writes to Iceberg) with ``properties`` in its snapshot summary."""
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    assert jvm is not None, "the SparkSession has no JVM"
    java_properties = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_properties.put(key, value)
    callable_ = _JavaCallable(action)
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_properties, callable_, jvm.java.lang.Class.forName("java.lang.RuntimeException")
        )
    except Py4JJavaError:
        if callable_.error is not None:
            raise callable_.error from None  # the Spark error itself, not py4j's wrapping
        raise
