"""The cluster suite's services: a Spark standalone cluster, S3Proxy, and an Iceberg JDBC catalog in a MariaDB.

Each is started once for the suite, on loopback, under the run's temporary
directory, and stopped at its end. :func:`lake` is what a Spark application
needs to reach the shared lake: the catalog's keys and the store's, with
the two secrets apart (the daemon reads them from its environment).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.infra.mariadb import MariaDBServer
from tests.infra.s3proxy import CLIENT_ENV, S3ProxyServer
from tests.infra.spark_cluster import SparkStandaloneCluster
from tests.integration.real.cluster.daemon_on_cluster import CATALOG, SharedLake

CATALOG_DB = "iceberg_catalog"


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory) -> Iterator[SparkStandaloneCluster]:
    """A master and two one-core workers; executors get 512 MB each."""
    with SparkStandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, worker_memory="640m") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory) -> Iterator[S3ProxyServer]:
    with S3ProxyServer(tmp_path_factory.mktemp("s3proxy")) as store:
        yield store


@pytest.fixture(scope="session")
def catalog_db(tmp_path_factory) -> Iterator[MariaDBServer]:
    """The catalog's own MariaDB: not the source's, whose binlog Canal reads (as in production)."""
    with MariaDBServer(tmp_path_factory.mktemp("catalog-db")) as server:
        yield server


@pytest.fixture(scope="session")
def lake(catalog_db: MariaDBServer, s3_store: S3ProxyServer) -> SharedLake:
    """A JDBC catalog in a database of its own, with a user of its own, and its warehouse in the bucket."""
    password = secrets.token_hex(12)
    mariadb = catalog_db
    mariadb.create_database(CATALOG_DB)
    mariadb.execute("DROP USER IF EXISTS 'iceberg'@'%'", f"CREATE USER 'iceberg'@'%' IDENTIFIED BY '{password}'",
                    f"GRANT ALL ON `{CATALOG_DB}`.* TO 'iceberg'@'%'")
    store = s3_store.iceberg_properties()
    secret_key = store.pop("s3.secret-access-key")
    return SharedLake(
        properties={"type": "jdbc", "uri": f"jdbc:mariadb://{mariadb.host}:{mariadb.port}/{CATALOG_DB}",
                    # V1 tables: Iceberg's Spark catalog looks up views, which a V0 JDBC catalog refuses.
                    "jdbc.schema-version": "V1", "jdbc.user": "iceberg",
                    "warehouse": f"s3://{s3_store.bucket}/warehouse", **store},
        secrets={"jdbc.password": password, "s3.secret-access-key": secret_key})


@pytest.fixture(scope="session")
def lake_reader(spark, lake: SharedLake):
    """The test run's own SparkSession as a second application on the shared lake (catalog :data:`CATALOG`)."""
    jvm = spark.sparkContext._jvm
    for key, value in CLIENT_ENV.items():  # the AWS SDK reads these as system properties too
        jvm.java.lang.System.setProperty("aws." + _camel(key.removeprefix("AWS_")), value)
    for key, value in lake.spark_conf().items():
        spark.conf.set(key, value)
    # Iceberg's catalog caches the tables it loads: a reader polling one kept seeing it as it first loaded it.
    spark.conf.set(f"spark.sql.catalog.{CATALOG}.cache-enabled", "false")
    return spark


def _camel(name: str) -> str:
    """``REQUEST_CHECKSUM_CALCULATION`` -> ``requestChecksumCalculation``."""
    first, *rest = name.lower().split("_")
    return first + "".join(part.title() for part in rest)
