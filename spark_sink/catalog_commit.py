"""Several targets' staged commits published as one commit of an Iceberg REST catalog.

Each target's rows are written and staged first (:func:`spark_sink.equality.stage`):
files, manifests and a snapshot that main does not point at yet. One request
(``POST /v1/{prefix}/transactions/commit``) then moves every target's main, or
none: the catalog checks that each table's main is still the one its change was
staged on. A catalog that applies the request as one commit (Nessie) shows
readers every target moved together. The JVM side is
``spark_sink/decoder/.../CatalogTransaction.java``.

How a publish ended is not always known: a reply lost on the way, or a server
error, may hide a commit that landed. :class:`PublishError` says which it was;
the targets' stamps, read back, settle it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from canalbridge.sync.channel.sink import StagedWrite
from canalbridge.sync.errors import PublishFailed
from spark_sink.classpath import decoder_class
from spark_sink.equality import NEEDED_BY, Staged
from spark_sink.errors import java_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TRANSACTION_CLASS = "canalbridge.spark.CatalogTransaction"
_REFUSED = "org.apache.iceberg.exceptions.CommitFailedException"
# Raised before any request is sent: the catalog (its server, or its type) offers no multi-table commit.
_CANNOT = ("java.lang.UnsupportedOperationException", "java.lang.IllegalArgumentException")


log = structlog.get_logger("canalbridge.spark")


class PublishError(PublishFailed):
    """A catalog commit of several targets that did not report success. ``refused``: the catalog said it applied
    none (a target moved since its change was staged); otherwise it may have landed. ``permanent``: it was never
    sent, as the catalog cannot take it (trying again cannot help)."""

    def __init__(self, targets: Sequence[str], refused: bool, cause: BaseException, *,
                 permanent: bool = False) -> None:
        self.cause = cause
        self.transient = not permanent
        outcome = "refused it" if refused else "may have applied it"
        super().__init__(tuple(targets), refused, f"the commit of {', '.join(targets)} in one catalog transaction "
                                                  f"failed and the catalog {outcome}: {java_error(cause)}")


def _transaction(spark: SparkSession) -> Any:
    return decoder_class(spark, TRANSACTION_CLASS, NEEDED_BY)  # (the jar of the equality writer it publishes)


def unsupported(spark: SparkSession, catalog: str) -> str | None:
    """Why the Spark catalog ``catalog`` cannot commit several tables at once (None: it can)."""
    reason = _transaction(spark).unsupported(spark._jsparkSession, catalog)
    return None if reason is None else str(reason)


def publish(spark: SparkSession, staged: Sequence[Staged], timeout_s: float = 120.0) -> None:
    """Move every staged target's main in one catalog commit; :class:`PublishError` if that did not report
    success (the staged files stay: the caller reads the targets back and discards what did not land). The
    request waits at most ``timeout_s`` for the catalog to connect and to answer, unless the catalog's own
    ``rest.client.*-timeout-ms`` settings say otherwise."""
    if not staged:
        return
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    gateway = spark.sparkContext._gateway
    assert gateway is not None
    handles = gateway.jvm.java.util.ArrayList()
    for each in staged:
        handles.add(each.handle)
    try:
        _transaction(spark).publish(spark._jsparkSession, spark._jsc.hadoopConfiguration(), handles,
                                    int(timeout_s * 1000))
    except (Py4JJavaError, CapturedException) as exc:
        # (PySpark turns some Java exceptions, IllegalArgumentException among them, into exceptions of its own)
        thrown = exc.java_exception if isinstance(exc, Py4JJavaError) else exc._origin
        name = "" if thrown is None else str(thrown.getClass().getName())
        cannot = name in _CANNOT
        raise PublishError([each.target for each in staged], name == _REFUSED or cannot, exc,
                           permanent=cannot) from exc
    finally:
        for each in staged:  # (Spark's catalog caches tables: its next read loads what the catalog holds now)
            spark.catalog.refreshTable(each.target)


class IcebergPublisher:
    """A job's :class:`~canalbridge.sync.channel.sink.CatalogPublisher` over its Iceberg REST catalog, through
    the session ``spark()`` gives (the one in use, after a lost JVM too)."""

    def __init__(self, spark: Callable[[], SparkSession], timeout_s: float) -> None:
        self._spark = spark
        self._timeout_s = timeout_s

    def publish(self, staged: Sequence[StagedWrite]) -> None:
        writes = [each for each in staged if isinstance(each, Staged)]
        assert len(writes) == len(staged), "staged by another writer than spark_sink's"
        try:
            publish(self._spark(), writes, self._timeout_s)
        except PublishFailed:
            raise
        except Exception as exc:  # (a lost session, a py4j error: whether it landed is read back)
            raise PublishError([each.target for each in writes], False, exc) from exc
        log.info("spark.published", targets=len(writes))
