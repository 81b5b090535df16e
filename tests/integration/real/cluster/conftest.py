"""The cluster suite's services: a Spark standalone cluster, S3Proxy, and an Iceberg JDBC catalog in a MariaDB.

Each is started once for the suite, on loopback, under the run's temporary
directory, and stopped at its end. :func:`lake` is what a Spark application
needs to reach the shared lake: the catalog's keys and the store's, with
the two secrets apart (the daemon reads them from its environment).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.infra.mariadb import MariaDBServer
from tests.infra.s3proxy import S3ProxyServer, store_client_in
from tests.infra.shared_lake import CATALOG, SharedLake, shared_lake, two_worker_cluster
from tests.infra.spark_cluster import SparkStandaloneCluster


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory) -> Iterator[SparkStandaloneCluster]:
    """A master and two one-core workers; executors get 512 MB each."""
    with two_worker_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
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
    return shared_lake(catalog_db, s3_store)


@pytest.fixture(scope="session")
def lake_reader(spark, lake: SharedLake):
    """The test run's own SparkSession as a second application on the shared lake (catalog :data:`CATALOG`)."""
    store_client_in(spark)
    for key, value in lake.spark_conf().items():
        spark.conf.set(key, value)
    # Iceberg's catalog caches the tables it loads: a reader polling one kept seeing it as it first loaded it.
    spark.conf.set(f"spark.sql.catalog.{CATALOG}.cache-enabled", "false")
    return spark
