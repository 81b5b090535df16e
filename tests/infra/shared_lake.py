"""The test cluster's shared lake: an Iceberg JDBC catalog in a MariaDB of its own, its warehouse in S3Proxy.

The cluster tests and ``bench.end_to_end --cluster`` build it, and an
application's conf for it, the same way.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from tests.infra.mariadb import MariaDBServer
from tests.infra.processes import LOOPBACK
from tests.infra.s3proxy import CLIENT_ENV, S3ProxyServer
from tests.infra.spark_cluster import SparkStandaloneCluster

# The catalog's name in every application: Iceberg's JDBC catalog keeps it with each table, and an application
# that names the catalog otherwise sees none of them.
CATALOG = "shared"
CATALOG_PREFIX = f"spark.sql.catalog.{CATALOG}"
CATALOG_DB = "iceberg_catalog"


@dataclass(frozen=True)
class SharedLake:
    """An Iceberg catalog in MariaDB whose warehouse is a bucket of S3Proxy."""

    properties: dict[str, str]  # catalog keys without secrets, under spark.sql.catalog.NAME.
    secrets: dict[str, str] = field(repr=False)  # catalog keys whose values are secrets

    def spark_conf(self, *, with_secrets: bool = True) -> dict[str, str]:
        """The catalog's keys as Spark conf entries for catalog :data:`CATALOG` (its secrets too, unless not)."""
        keys = {**self.properties, **(self.secrets if with_secrets else {})}
        return {CATALOG_PREFIX: "org.apache.iceberg.spark.SparkCatalog",
                **{f"{CATALOG_PREFIX}.{key}": value for key, value in keys.items()}}

    def secret_conf(self) -> dict[str, str]:
        """The catalog's secret keys as Spark conf entries, with their values."""
        return {f"{CATALOG_PREFIX}.{key}": value for key, value in self.secrets.items()}


def shared_lake(catalog_db: MariaDBServer, store: S3ProxyServer) -> SharedLake:
    """A JDBC catalog in a database of ``catalog_db`` with a user of its own, its warehouse in ``store``'s bucket."""
    password = secrets.token_hex(12)
    catalog_db.create_database(CATALOG_DB)
    catalog_db.execute("DROP USER IF EXISTS 'iceberg'@'%'", f"CREATE USER 'iceberg'@'%' IDENTIFIED BY '{password}'",
                       f"GRANT ALL ON `{CATALOG_DB}`.* TO 'iceberg'@'%'")
    properties = store.iceberg_properties()
    secret_key = properties.pop("s3.secret-access-key")
    return SharedLake(
        properties={"type": "jdbc", "uri": f"jdbc:mariadb://{catalog_db.host}:{catalog_db.port}/{CATALOG_DB}",
                    # V1 tables: Iceberg's Spark catalog looks up views, which a V0 JDBC catalog refuses.
                    "jdbc.schema-version": "V1", "jdbc.user": "iceberg",
                    "warehouse": f"s3://{store.bucket}/warehouse", **properties},
        secrets={"jdbc.password": password, "s3.secret-access-key": secret_key})


def cluster_conf(lake: SharedLake) -> dict[str, str]:
    """An application's ``spark.*`` keys on the test cluster, secrets apart: the driver on loopback (where the
    workers are), executors of 512 MB and one core on both workers, the lake as catalog :data:`CATALOG`, and
    the AWS SDK's settings for S3Proxy in the executors."""
    return {"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK,
            "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
            **lake.spark_conf(with_secrets=False),
            **{f"spark.executorEnv.{key}": value for key, value in CLIENT_ENV.items()}}


def two_worker_cluster(root: Path) -> SparkStandaloneCluster:
    """The test cluster: a master and two one-core workers with room for one 512 MB executor each."""
    return SparkStandaloneCluster(root, workers=2, worker_memory="640m")
