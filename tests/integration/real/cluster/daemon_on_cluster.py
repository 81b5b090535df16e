"""What the cluster tests share: the lake, the daemon's ``[spark]`` section for it and the cluster, its environment."""

from __future__ import annotations

from dataclasses import dataclass, field

from canalbridge.sync.position import EntryPosition
from tests.daemon_process import job_status
from tests.helpers import eventually
from tests.infra.s3proxy import CLIENT_ENV
from tests.infra.spark_cluster import SparkStandaloneCluster
from tests.integration.real.daemon_run import acked_through

# The catalog's name in every application: Iceberg's JDBC catalog keeps it with each table, and an application
# that names the catalog otherwise sees none of them.
CATALOG = "shared"


@dataclass(frozen=True)
class SharedLake:
    """An Iceberg catalog in MariaDB whose warehouse is a bucket of S3Proxy."""

    properties: dict[str, str]  # catalog keys without secrets, under spark.sql.catalog.NAME.
    secrets: dict[str, str] = field(repr=False)  # catalog keys whose values are secrets

    def spark_conf(self) -> dict[str, str]:
        """The catalog's keys, secrets included, as Spark conf entries for catalog :data:`CATALOG`."""
        prefix = f"spark.sql.catalog.{CATALOG}"
        return {prefix: "org.apache.iceberg.spark.SparkCatalog",
                **{f"{prefix}.{key}": value for key, value in {**self.properties, **self.secrets}.items()}}


def _variable(key: str) -> str:
    """The environment variable that holds a catalog key's secret: ``jdbc.password`` -> ``LAKE_JDBC_PASSWORD``."""
    return "LAKE_" + key.upper().replace(".", "_").replace("-", "_")


def cluster_sections(cluster: SparkStandaloneCluster, lake: SharedLake) -> str:
    """``[spark]`` for the cluster: its master, executors of 512 MB, the shared lake as catalog :data:`CATALOG`,
    and the lake's secrets by environment variable (:func:`secret_env`)."""
    prefix = f"spark.sql.catalog.{CATALOG}"
    conf = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            **{f"{prefix}.{key}": value for key, value in lake.properties.items()},
            **{f"spark.executorEnv.{key}": value for key, value in CLIENT_ENV.items()}}
    return (f'master = "{cluster.master_url}"\ncatalog = "{CATALOG}"\n[spark.conf]\n'
            + "".join(f'"{key}" = "{value}"\n' for key, value in conf.items())
            + "[spark.conf_env]\n" + "".join(f'"{prefix}.{key}" = "{_variable(key)}"\n' for key in lake.secrets))


def secret_env(lake: SharedLake) -> dict[str, str]:
    """The daemon's environment for :func:`cluster_sections`: the lake's secrets, and the store's AWS settings."""
    return {**CLIENT_ENV, **{_variable(key): value for key, value in lake.secrets.items()}}


def wait_acked(daemon, config, mariadb) -> None:
    """Until the daemon acked through the source's last transaction so far."""
    last = EntryPosition(*mariadb.last_event_start("Xid"))
    assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 300), (
        f"not acked through {last}: {job_status(config, 'real')}")
