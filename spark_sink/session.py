"""The daemon's one SparkSession, with the Iceberg runtime and catalog configured.

The official Iceberg Spark runtime comes the way Spark users expect, unless
the user's conf already brings Iceberg through ``spark.jars`` or
``spark.jars.packages``: run from a checkout, it is the jar ``make
iceberg-jar`` put in the checkout's cache (a missing one is an error naming
that command); installed with pip, it is the ``spark.jars.packages``
coordinates, which Spark resolves from Maven Central at start. The JVM
RowChange decoder (``make decoder-jar``), the JDBC driver a snapshot reads
the source with (``make jdbc-driver``) and Iceberg's AWS bundle, whose
``S3FileIO`` writes to S3 and compatible stores (``make cluster-jars``),
join ``spark.jars`` when they are in the cache; Spark ships ``spark.jars``
to a cluster's executors.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from spark_sink.settings import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
ICEBERG_VERSION = "1.11.0"  # the newest that works with pyspark 3.5; the Makefile fetches the same
ICEBERG_ARTIFACT = "iceberg-spark-runtime-3.5_2.12"
ICEBERG_PACKAGE = f"org.apache.iceberg:{ICEBERG_ARTIFACT}:{ICEBERG_VERSION}"
ICEBERG_JAR = f"{ICEBERG_ARTIFACT}-{ICEBERG_VERSION}.jar"
CHECKOUT = Path(__file__).resolve().parents[1]
DECODER_JAR = "canalbridge-decoder.jar"
DRIVER_MEMORY = "2g"  # the driver JVM's heap unless [spark.conf] sets spark.driver.memory

log = structlog.get_logger("canalbridge.spark")
_lock = threading.Lock()
_session: SparkSession | None = None


class SparkSetupError(Exception):
    """Spark cannot start here (no Java, no Iceberg runtime)."""


def cache_dir() -> Path:
    """The artifact cache the Makefile fills: ``CANALBRIDGE_CACHE``, or ``.cache`` in the checkout."""
    return Path(os.environ.get("CANALBRIDGE_CACHE") or CHECKOUT / ".cache")


def running_from_checkout() -> bool:
    """Whether this code runs from a source checkout (with its Makefile) rather than a pip install."""
    return (CHECKOUT / "Makefile").is_file() and (CHECKOUT / "setup.cfg").is_file()


def iceberg_runtime() -> tuple[str, str]:
    """The Spark conf key and value that bring the Iceberg runtime (see the module docstring)."""
    jar = cache_dir() / "iceberg" / ICEBERG_JAR
    if jar.is_file():
        return "spark.jars", str(jar)
    if running_from_checkout() or "CANALBRIDGE_CACHE" in os.environ:
        raise SparkSetupError(
            f"the Iceberg Spark runtime {ICEBERG_JAR} is not in {jar.parent}: run `make iceberg-jar` "
            f"(fetches it from Maven Central), or set spark.jars.packages = \"{ICEBERG_PACKAGE}\" in [spark.conf]"
        )
    return "spark.jars.packages", ICEBERG_PACKAGE


def decoder_jar() -> Path:
    """Where ``make decoder-jar`` puts the JVM RowChange decoder (:mod:`spark_sink.decode`)."""
    return cache_dir() / "decoder" / DECODER_JAR


def jdbc_driver_jars() -> list[Path]:
    """The JDBC driver ``make jdbc-driver`` put in the cache (whichever version the Makefile names), if any."""
    return sorted((cache_dir() / "jdbc").glob("mariadb-java-client-*.jar"))


def object_store_jars() -> list[Path]:
    """Iceberg's AWS bundle ``make cluster-jars`` put in the cache, if it did."""
    return sorted((cache_dir() / "cluster").glob("iceberg-aws-bundle-*.jar"))


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
    user = {**settings.conf, **settings.secret_conf}
    brings_iceberg = any("iceberg" in user.get(key, "") for key in ("spark.jars", "spark.jars.packages"))
    if not brings_iceberg:
        key, value = iceberg_runtime()
        conf[key] = ",".join([value] + ([user.pop(key)] if key in user else []))
    prefix = f"spark.sql.catalog.{settings.catalog}"
    if prefix not in user:
        conf[prefix] = ICEBERG_CATALOG
        conf[f"{prefix}.type"] = "hadoop"
        conf[f"{prefix}.warehouse"] = settings.warehouse
    conf.update(user)
    decoder = decoder_jar()
    extra = [str(decoder)] if decoder.is_file() else []  # built from this checkout; without it, Python decodes
    extra += [str(jar) for jar in jdbc_driver_jars() + object_store_jars()]
    if extra:
        conf["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars"), *extra]))
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

