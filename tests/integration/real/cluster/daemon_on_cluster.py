"""What the cluster tests share: the daemon's ``[spark]`` section for the cluster and the shared lake, its
environment, and a wait for its acks."""

from __future__ import annotations

from canalbridge.sync.model.position import EntryPosition
from tests.daemon_process import job_status
from tests.helpers import eventually
from tests.infra.s3proxy import CLIENT_ENV
from tests.infra.shared_lake import CATALOG, CATALOG_PREFIX, SharedLake, cluster_conf
from tests.infra.spark_cluster import SparkStandaloneCluster
from tests.integration.real.daemon_run import acked_through


def _variable(key: str) -> str:
    """The environment variable that holds a catalog key's secret: ``jdbc.password`` -> ``LAKE_JDBC_PASSWORD``."""
    return "LAKE_" + key.upper().replace(".", "_").replace("-", "_")


def cluster_sections(cluster: SparkStandaloneCluster, lake: SharedLake) -> str:
    """``[spark]`` for the cluster: its master, :func:`~tests.infra.shared_lake.cluster_conf`, and the lake's
    secrets by environment variable (:func:`secret_env`)."""
    return (f'master = "{cluster.master_url}"\ncatalog = "{CATALOG}"\n[spark.conf]\n'
            + "".join(f'"{key}" = "{value}"\n' for key, value in cluster_conf(lake).items())
            + "[spark.conf_env]\n"
            + "".join(f'"{CATALOG_PREFIX}.{key}" = "{_variable(key)}"\n' for key in lake.secrets))


def secret_env(lake: SharedLake) -> dict[str, str]:
    """The daemon's environment for :func:`cluster_sections`: the lake's secrets, and the store's AWS settings."""
    return {**CLIENT_ENV, **{_variable(key): value for key, value in lake.secrets.items()}}


def wait_acked(daemon, config, mariadb) -> None:
    """Until the daemon acked through the source's last transaction so far."""
    last = EntryPosition(*mariadb.last_event_start("Xid"))
    assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 300), (
        f"not acked through {last}: {job_status(config, 'real')}")
