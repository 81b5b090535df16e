"""The daemon's one SparkSession, with the Iceberg runtime and catalog configured.

The jars the config needs (the Iceberg runtime, a JDBC driver, Iceberg's AWS
bundle, the canalbridge decoder) and where each comes from are
:mod:`spark_sink.classpath`'s; Spark ships ``spark.jars`` to a cluster's
executors and resolves ``spark.jars.packages`` at start.
"""

from __future__ import annotations

import os
import shutil
import threading
from typing import TYPE_CHECKING

import structlog

from spark_sink import classpath
from spark_sink.errors import SparkSetupError
from spark_sink.settings import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
DRIVER_MEMORY = "2g"  # the driver JVM's heap unless [spark.conf] sets spark.driver.memory

log = structlog.get_logger("canalbridge.spark")
_lock = threading.Lock()
_session: SparkSession | None = None


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
        # An explicit heap: Spark's 1 GB default ran full in the 2M-row benchmark (full GCs).
        "spark.driver.memory": DRIVER_MEMORY,
    }
    if settings.master.startswith("local"):
        # Keep a local Spark on loopback rather than the host's first interface.
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    if settings.stages_through_driver:
        # Staged Arrow batches become tasks' partitions, turned into rows by the executors. Under Spark's 48 MB
        # threshold they would be a local relation instead: the driver converts every row, and every plan
        # over it walks them all again.
        conf["spark.sql.execution.arrow.localRelationThreshold"] = "0"
    user = {**settings.conf, **settings.secret_conf}
    prefix = f"spark.sql.catalog.{settings.catalog}"
    if prefix not in user:
        conf[prefix] = ICEBERG_CATALOG
        conf[f"{prefix}.type"] = "hadoop"
        conf[f"{prefix}.warehouse"] = settings.warehouse
    conf.update(user)
    found = classpath.resolve(settings)
    for key, values in (("spark.jars", found.jars), ("spark.jars.packages", found.packages)):
        if values:
            conf[key] = ",".join(filter(None, [conf.get(key), *values]))
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
        # Commit properties are set through a Python Callable called from the JVM. Its
        # threads are daemons: py4j's default would keep a process whose main thread
        # ended without stop_spark() from ever exiting. (Not PySpark's
        # ensure_callback_server_started: it points the JVM at a second connection,
        # and shutting that down hangs, a reader holding its stream's lock.)
        gateway = session.sparkContext._gateway
        assert gateway is not None, "PySpark started without a py4j gateway"
        parameters = gateway.callback_server_parameters
        parameters.daemonize = parameters.daemonize_connections = True
        gateway.start_callback_server(parameters)
        _session = session
        return session


def make_active(session: SparkSession) -> None:
    """Make ``session`` the active one of the calling thread's JVM thread.

    Spark reads its SQL settings from that thread's active session when an
    expression is built through the DataFrame API (``Column.cast``, say): on
    a thread with none, from Spark's defaults, where ANSI mode is off and a
    cast of 'abc' to int gives NULL instead of failing. A channel's thread
    has none until it is told.
    """
    jvm = session.sparkContext._jvm
    assert jvm is not None, "a SparkSession without a JVM"
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)


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


def release_checkpoint(frame: DataFrame) -> None:
    """Drop the blocks ``frame.localCheckpoint()`` holds now, rather than when a JVM garbage collection lets
    Spark's cleaner find them: a daemon that checkpoints every few seconds would fill the block manager first."""
    try:
        frame._jdf.queryExecution().logical().rdd().unpersist(False)
    except Exception as exc:  # a dead session must not hide the caller's own error
        log.debug("spark.release_failed", error=str(exc))



def checkpoint_held(frame: DataFrame) -> bool:
    """Whether every partition ``frame.localCheckpoint()`` holds is still held: its session's JVM answers, and
    no executor that held blocks of it was lost (a lost block cannot be read again: there is no lineage)."""
    try:
        if not session_alive(frame.sparkSession):
            return False
        rdd = frame._jdf.queryExecution().logical().rdd()
        held = {info.id(): (info.numCachedPartitions(), info.numPartitions())
                for info in frame.sparkSession.sparkContext._jsc.sc().getRDDStorageInfo()}
        cached, partitions = held.get(rdd.id(), (0, rdd.getNumPartitions()))
        return cached == partitions
    except Exception as exc:  # py4j errors, refused connections: nothing is held any more
        log.debug("spark.checkpoint_check_failed", error=str(exc))
        return False
