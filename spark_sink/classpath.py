"""The jars the daemon's Spark needs, and where each one comes from.

What a config needs:

- the Iceberg runtime for this Spark, unless ``spark.jars`` or
  ``spark.jars.packages`` already brings one;
- MariaDB's JDBC driver when a job has a ``[job.snapshot]`` (Spark reads the
  source's tables with it) or a JDBC catalog's ``uri`` is ``jdbc:mariadb:`` or
  ``jdbc:mysql:``; PostgreSQL's for a ``jdbc:postgresql:`` catalog;
- Iceberg's AWS bundle when the catalog's warehouse is on S3 or its
  ``io-impl`` is ``S3FileIO``;
- the canalbridge decoder, which a wheel built by ``make dist`` carries
  (``spark_sink/jars``) and a checkout finds in its cache.

Where the others come from, the first that applies:

1. ``[spark] jars_dir``: every jar in that directory joins ``spark.jars``,
   and a needed one that is not there is an error naming its coordinates.
   For hosts that cannot reach a Maven repository.
2. A checkout (or ``CANALBRIDGE_CACHE``): the cache the Makefile fills; a
   missing jar names the make target that fetches it.
3. Otherwise ``spark.jars.packages``: Spark resolves the coordinates from
   Maven Central (or the repositories the user's ``spark.jars.repositories``
   names) when it starts, as Iceberg's and Delta's quickstarts do.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_sink.errors import SparkSetupError
from spark_sink.settings import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_VERSION = "1.11.0"  # the newest that works with pyspark 3.5; the Makefile fetches the same
ICEBERG_ARTIFACT = "iceberg-spark-runtime-3.5_2.12"
ICEBERG_JAR = f"{ICEBERG_ARTIFACT}-{ICEBERG_VERSION}.jar"
DECODER_JAR = "canalbridge-decoder.jar"
PACKAGED = Path(__file__).resolve().parent / "jars"  # where a wheel built by `make dist` carries the decoder
CHECKOUT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Jar:
    """A jar the daemon's Spark may need: its Maven coordinates and a class that shows it is loaded."""

    coordinates: str
    probe: str  # a class file inside it
    purpose: str
    cache_glob: str  # where the Makefile puts it in the cache
    make_target: str | None  # None: the Makefile does not fetch it

    @property
    def artifact(self) -> str:
        """``group:artifact``, without the version."""
        return self.coordinates.rpartition(":")[0]


ICEBERG_RUNTIME = Jar(f"org.apache.iceberg:{ICEBERG_ARTIFACT}:{ICEBERG_VERSION}",
                      "org/apache/iceberg/spark/SparkCatalog.class", "the Iceberg runtime for Spark 3.5",
                      f"iceberg/{ICEBERG_JAR}", "iceberg-jar")
MARIADB_DRIVER = Jar("org.mariadb.jdbc:mariadb-java-client:3.5.7", "org/mariadb/jdbc/Driver.class",
                     "MariaDB's JDBC driver", "jdbc/mariadb-java-client-*.jar", "jdbc-driver")
POSTGRESQL_DRIVER = Jar("org.postgresql:postgresql:42.7.14", "org/postgresql/Driver.class",
                        "PostgreSQL's JDBC driver", "jdbc/postgresql-*.jar", None)
AWS_BUNDLE = Jar(f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}", "org/apache/iceberg/aws/s3/S3FileIO.class",
                 "Iceberg's AWS bundle (S3FileIO)", "cluster/iceberg-aws-bundle-*.jar", "cluster-jars")
ICEBERG_PACKAGE = ICEBERG_RUNTIME.coordinates


@dataclass(frozen=True)
class Need:
    """A jar the config needs, and which part of the config needs it."""

    jar: Jar
    because: str


@dataclass(frozen=True)
class Classpath:
    """What joins the session's ``spark.jars`` and ``spark.jars.packages``."""

    jars: tuple[str, ...]
    packages: tuple[str, ...]


def cache_dir() -> Path:
    """The artifact cache the Makefile fills: ``CANALBRIDGE_CACHE``, or ``.cache`` in the checkout."""
    return Path(os.environ.get("CANALBRIDGE_CACHE") or CHECKOUT / ".cache")


def running_from_checkout() -> bool:
    """Whether this code runs from a source checkout (with its Makefile) rather than a pip install."""
    return (CHECKOUT / "Makefile").is_file() and (CHECKOUT / "setup.cfg").is_file()


def uses_cache() -> bool:
    """Whether the jars come from the Makefile's cache (a checkout, or a cache named by the environment)."""
    return running_from_checkout() or "CANALBRIDGE_CACHE" in os.environ


def decoder_jar() -> Path:
    """The JVM RowChange decoder: the one the package carries, else the one ``make decoder-jar`` built."""
    packaged = PACKAGED / DECODER_JAR
    if packaged.is_file() or not uses_cache():
        return packaged
    return cache_dir() / "decoder" / DECODER_JAR


def decoder_class(spark: SparkSession, name: str, needed_by: str) -> Any:
    """The class ``name`` of the decoder jar in ``spark``'s JVM; :class:`SparkSetupError` saying that
    ``needed_by`` needs the jar, and how to get it, when it is not on Spark's classpath."""
    from py4j.java_gateway import JavaClass

    found = spark.sparkContext._jvm
    for part in name.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):
        raise SparkSetupError(f"{needed_by} needs the canalbridge decoder jar on Spark's classpath (looked for "
                              f"{decoder_jar()}): run `make decoder-jar`")
    return found


def needs(settings: SparkSettings) -> list[Need]:
    """The jars this config needs, each with the part of the config that needs it (see the module docstring)."""
    conf = {**settings.conf, **settings.secret_conf}
    found: list[Need] = []
    if not brings_iceberg_runtime(conf):
        found.append(Need(ICEBERG_RUNTIME, "every target is an Iceberg table"))
    if settings.reads_sources:
        found.append(Need(MARIADB_DRIVER, "a [job.snapshot] reads its source's tables through Spark"))
    prefix = f"spark.sql.catalog.{settings.catalog}"
    uri = conf.get(f"{prefix}.uri", "")
    if conf.get(f"{prefix}.type") == "jdbc" or conf.get(f"{prefix}.catalog-impl", "").endswith(".JdbcCatalog"):
        if uri.startswith(("jdbc:mariadb:", "jdbc:mysql:")):
            found.append(Need(MARIADB_DRIVER, f"the JDBC catalog {settings.catalog} is at {uri.split('?')[0]}"))
        elif uri.startswith("jdbc:postgresql:"):
            found.append(Need(POSTGRESQL_DRIVER, f"the JDBC catalog {settings.catalog} is at {uri.split('?')[0]}"))
    warehouse = conf.get(f"{prefix}.warehouse", settings.warehouse)
    if conf.get(f"{prefix}.io-impl", "").endswith(".S3FileIO") or warehouse.startswith(("s3://", "s3a://")):
        found.append(Need(AWS_BUNDLE, f"the catalog {settings.catalog} stores its files in S3"))
    first = {need.jar: need for need in reversed(found)}  # one need per jar: the first reason given
    return [need for need in found if first[need.jar] is need]


def brings_iceberg_runtime(conf: Mapping[str, str]) -> bool:
    """Whether the user's own ``spark.jars`` or ``spark.jars.packages`` names an Iceberg Spark runtime."""
    return any("iceberg-spark-runtime" in conf.get(key, "") for key in ("spark.jars", "spark.jars.packages"))


def resolve(settings: SparkSettings) -> Classpath:
    """Where each jar the config needs comes from; raises SparkSetupError naming what is missing."""
    decoder = decoder_jar()
    if not decoder.is_file() and not uses_cache():
        raise SparkSetupError(
            f"this installation of canalbridge has no decoder jar ({decoder}): it was installed from a wheel "
            f"built without one; install a wheel built by `make dist`")
    wanted = needs(settings)
    if settings.jars_dir is not None:
        jars = jars_in(Path(settings.jars_dir))
        missing = [need for need in wanted if not any(provides(jar, need.jar.probe) for jar in jars)]
        if missing:
            raise SparkSetupError(f"spark.jars_dir {settings.jars_dir} lacks " + "; ".join(
                f"{need.jar.purpose} ({need.jar.coordinates}, needed because {need.because})" for need in missing))
        return Classpath(tuple(str(jar) for jar in [decoder, *jars] if jar.is_file()), ())
    if uses_cache():
        return Classpath(tuple(str(jar) for jar in [*_cached(wanted), *_cached_extras(wanted)]
                               + ([decoder] if decoder.is_file() else [])), ())
    # (a jar the user's spark.jars.packages names already, in whatever version, is theirs to give)
    theirs = {package.strip().rpartition(":")[0]
              for package in {**settings.conf, **settings.secret_conf}.get("spark.jars.packages", "").split(",")}
    return Classpath((str(decoder),), tuple(dict.fromkeys(need.jar.coordinates for need in wanted
                                                          if need.jar.artifact not in theirs)))


def jars_in(directory: Path) -> list[Path]:
    """The jars of a ``jars_dir``, in name order; raises SparkSetupError when it is not a directory."""
    if not directory.is_dir():
        raise SparkSetupError(f"spark.jars_dir {directory} is not a directory")
    return sorted(directory.glob("*.jar"))


def provides(jar: Path, probe: str) -> bool:
    """Whether ``jar`` holds the class file ``probe`` (a jar that is not a zip holds nothing)."""
    try:
        with zipfile.ZipFile(jar) as archive:
            archive.getinfo(probe)
            return True
    except (KeyError, OSError, zipfile.BadZipFile):
        return False


def _cached(wanted: list[Need]) -> list[Path]:
    found = []
    for need in wanted:
        matches = sorted(cache_dir().glob(need.jar.cache_glob))
        if not matches:
            fetch = (f"run `make {need.jar.make_target}` (fetches it from Maven Central)"
                     if need.jar.make_target else f"put it in {cache_dir() / need.jar.cache_glob.split('/')[0]}")
            raise SparkSetupError(
                f"{need.jar.purpose} ({need.jar.coordinates}) is not in {cache_dir()}: {fetch}, or put it in a "
                f"directory named by [spark] jars_dir; needed because {need.because}")
        found.append(matches[-1])
    return list(dict.fromkeys(found))


def _cached_extras(wanted: list[Need]) -> list[Path]:
    # A checkout's tests share one session between configs: the cached drivers and bundle join it whether or not
    # this config needs them.
    needed = {need.jar for need in wanted}
    extras = []
    for jar in (MARIADB_DRIVER, AWS_BUNDLE):
        if jar not in needed:
            extras += sorted(cache_dir().glob(jar.cache_glob))[-1:]
    return extras
