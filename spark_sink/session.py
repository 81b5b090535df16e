"""The daemon's one SparkSession, with the Iceberg runtime and catalog configured.

The Iceberg runtime jar comes from the PyPI wheel
``snowpark-connect-deps-iceberg`` (1.0.1 carries Iceberg 1.9.2 for Spark 3.5 /
Scala 2.12), unless the user's conf already brings Iceberg through
``spark.jars`` or ``spark.jars.packages``.
"""

from __future__ import annotations

import os
import shutil
import threading
from typing import TYPE_CHECKING

import structlog

from spark_sink.settings import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
_RUNTIME_JAR_NAME = "iceberg-spark-runtime-3.5_2.12"

log = structlog.get_logger("canalbridge.spark")
_lock = threading.Lock()
_session: SparkSession | None = None


class SparkSetupError(Exception):
    """Spark cannot start here (no Java, no Iceberg runtime)."""


def iceberg_runtime_jar() -> str:
    """Path of the Iceberg Spark runtime jar shipped in snowpark-connect-deps-iceberg."""
    try:
        import snowpark_connect_deps_iceberg
    except ImportError as exc:  # pragma: no cover - a dependency of this package
        raise SparkSetupError("snowpark-connect-deps-iceberg is not installed") from exc
    for jar in snowpark_connect_deps_iceberg.list_jars():
        if _RUNTIME_JAR_NAME in str(jar):
            return str(jar)
    raise SparkSetupError(f"no {_RUNTIME_JAR_NAME} jar in snowpark-connect-deps-iceberg")


def session_conf(settings: SparkSettings) -> dict[str, str]:
    """The full Spark conf: our defaults, then the user's keys on top."""
    conf: dict[str, str] = {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.sql.session.timeZone": "UTC",
        # Casts fail loudly on text that is not a value of its type, instead of yielding NULL.
        "spark.sql.ansi.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # progress bars would interleave with the log
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    }
    if settings.master.startswith("local"):
        # Keep a local Spark on loopback rather than the host's first interface.
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    user = dict(settings.conf)
    brings_iceberg = any("iceberg" in user.get(key, "") for key in ("spark.jars", "spark.jars.packages"))
    if not brings_iceberg:
        jars = [iceberg_runtime_jar()] + ([user.pop("spark.jars")] if "spark.jars" in user else [])
        conf["spark.jars"] = ",".join(jars)
    prefix = f"spark.sql.catalog.{settings.catalog}"
    if prefix not in user:
        conf[prefix] = ICEBERG_CATALOG
        conf[f"{prefix}.type"] = "hadoop"
        conf[f"{prefix}.warehouse"] = settings.warehouse
    conf.update(user)
    return conf


def session_alive(session: SparkSession) -> bool:
    """Whether the session's JVM still answers and its context is not stopped."""
    try:
        return not session.sparkContext._jsc.sc().isStopped()
    except Exception:  # py4j errors and refused connections: the JVM is gone
        return False


def get_spark(settings: SparkSettings) -> SparkSession:
    """The process's SparkSession, built on first use and shared by every job and channel.

    A session whose JVM died (killed, out of memory) is dropped and a new one
    is built, so that writers can carry on after a retry.
    """
    global _session
    with _lock:
        if _session is not None:
            if session_alive(_session):
                return _session
            log.warning("spark.session_lost", action="starting a new SparkSession")
            _forget_dead_session()
            _session = None
        if shutil.which("java") is None:
            raise SparkSetupError(
                "PySpark needs Java 17 and 'java' is not on PATH: "
                "install it (Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless)"
            )
        from pyspark.sql import SparkSession

        if settings.master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM reads it at start
        builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
        for key, value in session_conf(settings).items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        # Commit properties are set through a Python Callable called from the JVM.
        gateway = session.sparkContext._gateway
        assert gateway is not None, "PySpark started without a py4j gateway"
        gateway.start_callback_server()
        _session = session
        return session


def _forget_dead_session() -> None:
    """Clear PySpark's process-wide singletons so that the next builder launches a new JVM."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession as Session

    gateway = SparkContext._gateway
    if gateway is not None:
        try:
            gateway.shutdown_callback_server()
        except Exception as exc:  # the callback server may already be gone with its JVM
            log.debug("spark.callback_server_shutdown_failed", error=str(exc))
        process = getattr(gateway, "proc", None)
        if process is not None and process.poll() is None:  # hung rather than dead
            process.kill()
            process.wait(30)
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    Session._instantiatedSession = None
    Session._activeSession = None


def stop_spark() -> None:
    """Stop the shared session (at daemon exit)."""
    global _session
    with _lock:
        if _session is None:
            return
        if not session_alive(_session):
            _forget_dead_session()
        else:
            gateway = _session.sparkContext._gateway
            if gateway is not None:
                gateway.shutdown_callback_server()
            _session.stop()
        _session = None
