"""Where the real-stack artifacts live: the git-ignored cache that the Makefile fills.

The Makefile fetches them from Maven Central (``make real-stack``); here they
are only located, and a missing one is an error naming the make target
that fetches it. ``CANALBRIDGE_CACHE`` overrides the cache directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from spark_sink.classpath import cache_dir
from tests.infra.processes import find_binary

CANAL_VERSION = "1.1.7"  # see deploy/maven/canal/pom.xml: no 1.1.8 server modules on Maven Central
LAUNCHER_CLASS = "canalbridge.devkit.CanalBridgeDevLauncher"
KAFKA_VERSION = "3.9.1"  # see deploy/maven/kafka/pom.xml
NESSIE_VERSION = "0.99.0"  # see the Makefile
NESSIE_JAVA = 21  # the oldest Java its classes run on
JVM_DIRS = Path("/usr/lib/jvm")  # where Debian's and Temurin's packages install their JDKs


class MissingArtifact(RuntimeError):
    """A fetched jar or an installed binary is not there."""


def canal_home() -> Path:
    """The Canal server's cached ``lib/`` and compiled ``launcher/``."""
    home = cache_dir() / f"canal-{CANAL_VERSION}"
    if not (home / ".complete").is_file() or not any((home / "lib").glob("canal.server-*.jar")):
        raise MissingArtifact(
            f"Canal {CANAL_VERSION} server jars are not in {home}: run `make canal-jars` "
            "(fetches them from Maven Central with mvn)"
        )
    return home


def kafka_home() -> Path:
    """The Kafka broker's cached ``lib/``."""
    home = cache_dir() / f"kafka-{KAFKA_VERSION}"
    if not (home / ".complete").is_file() or not any((home / "lib").glob("kafka_2.13-*.jar")):
        raise MissingArtifact(
            f"the Kafka {KAFKA_VERSION} broker jars are not in {home}: run `make kafka-jars` "
            "(fetches them from Maven Central with mvn)"
        )
    return home


def flink_peer_home() -> Path:
    """Flink CDC's cached ``lib/`` and the peer benchmark's compiled ``harness/``."""
    home = cache_dir() / "flink-cdc-peer"
    if not (home / ".complete").is_file() or not any((home / "lib").glob("flink-sql-connector-mysql-cdc-*.jar")):
        raise MissingArtifact(
            f"Flink CDC's jars are not in {home}: run `make flink-peer` (fetches them from Maven Central with mvn)"
        )
    return home


def rest_catalog_home() -> Path:
    """The Iceberg REST catalog server's cached ``lib/`` and our compiled ``launcher/``."""
    home = cache_dir() / "rest-catalog"
    if not (home / ".complete").is_file() or not any((home / "lib").glob("iceberg-core-*-tests.jar")):
        raise MissingArtifact(
            f"the Iceberg REST catalog server's jars are not in {home}: run `make rest-catalog` "
            "(fetches them from Maven Central with mvn)"
        )
    return home


def canal_kafka_plugin() -> Path:
    """Canal's Kafka producer plugin (``connector.kafka``, with its dependencies), cached with Canal."""
    plugin = canal_home() / "plugin" / f"connector.kafka-{CANAL_VERSION}-jar-with-dependencies.jar"
    if not plugin.is_file():
        raise MissingArtifact(f"Canal's Kafka producer plugin is not at {plugin}: run `make canal-jars`")
    return plugin


def mariadb_binaries() -> tuple[str, str]:
    """Paths of ``mariadbd`` and ``mariadb-install-db``."""
    server, installer = find_binary("mariadbd"), find_binary("mariadb-install-db")
    if server is None or installer is None:
        raise MissingArtifact(
            "MariaDB's server is not installed (mariadbd, mariadb-install-db): run `make mariadb-server` "
            "(installs Debian's mariadb-server as root) or install mariadb-server yourself"
        )
    return server, installer


def java_binary() -> str:
    """The ``java`` that runs Canal."""
    java = find_binary("java")
    if java is None:
        raise MissingArtifact("'java' not found: Canal needs Java 17 (apt-get install -y openjdk-17-jre-headless)")
    return java


def cluster_jar(prefix: str) -> Path:
    """A jar ``make cluster-jars`` caches (S3Proxy, Iceberg's AWS bundle), by its name's ``prefix``."""
    found = sorted((cache_dir() / "cluster").glob(f"{prefix}-*.jar"))
    if not found:
        raise MissingArtifact(f"{prefix} is not in {cache_dir() / 'cluster'}: run `make cluster-jars` "
                              "(fetches it from Maven Central with mvn)")
    return found[-1]


def s3proxy_jar() -> Path:
    """S3Proxy with its dependencies, the S3-compatible store of the cluster tests."""
    return cluster_jar("s3proxy")


def nessie_jar() -> Path:
    """Project Nessie's server, one runner jar."""
    jar = cache_dir() / f"nessie-{NESSIE_VERSION}" / "nessie-quarkus-runner.jar"
    if not (jar.parent / ".complete").is_file() or not jar.is_file():
        raise MissingArtifact(f"Nessie {NESSIE_VERSION} is not at {jar}: run `make nessie` "
                              "(fetches it from Maven Central with mvn)")
    return jar


def newer_java_binary(oldest: int = NESSIE_JAVA) -> str:
    """A ``java`` of version ``oldest`` or newer: ``CANALBRIDGE_JAVA_HOME``'s, else ``JAVA_HOME``'s or the
    newest JDK under /usr/lib/jvm, whichever is new enough (a JDK's ``release`` file says its version)."""
    override = os.environ.get("CANALBRIDGE_JAVA_HOME")
    installed = sorted(JVM_DIRS.glob("*"), key=_java_version, reverse=True)
    java_home = os.environ.get("JAVA_HOME")
    homes = [Path(override)] if override else [*([Path(java_home)] if java_home else []), *installed]
    for home in homes:
        java = home / "bin" / "java"
        if _java_version(home) >= oldest and os.access(java, os.X_OK):
            return str(java)
    where = f"CANALBRIDGE_JAVA_HOME ({override})" if override else str(JVM_DIRS)
    raise MissingArtifact(f"no Java {oldest} or newer in {where}: Nessie's server needs one "
                          f"(install a JDK {oldest}+, or set CANALBRIDGE_JAVA_HOME to one)")


def _java_version(home: Path) -> int:
    """The feature version a JDK's ``release`` file names (0: none, or unreadable)."""
    try:
        text = (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    found = re.search(r'^JAVA_VERSION="(\d+)', text, re.MULTILINE)
    return int(found.group(1)) if found else 0
