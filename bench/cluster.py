"""``bench.end_to_end --cluster``: what a Spark cluster, a shared catalog and an object store add to each commit.

After the usual runs on ``local[2]`` into a Hadoop catalog on a local
directory, the backlog run again, in a process of its own (a Spark driver
JVM of its own), on a Spark standalone cluster of two one-core workers
(512 MB executors), into S3Proxy's bucket through an Iceberg JDBC catalog in
a MariaDB of its own: the configuration ``tests/integration/real/cluster``
tests. All of it on this machine's two cores: the cluster cannot be faster
here; the figures say what it costs.

The cluster run prints its figures as the local runs do, plus the catalog's
statements and the store's objects and MB per table commit (one table's
apply: its Spark jobs, data files and catalog commit), and the CPU of the
executors, S3Proxy and the catalog's MariaDB, each read from outside their
processes. :func:`compare` returns what goes into the summary line.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Sampling, cpu_seconds, in_child
from canalbridge.sync.model.position import Position
from canalbridge.sync.settings import CommitSettings
from spark_sink.settings import SparkSettings
from tests.infra.mariadb import MariaDBServer
from tests.infra.processes import LOOPBACK
from tests.infra.s3proxy import CLIENT_ENV, S3ProxyServer
from tests.infra.shared_lake import CATALOG, cluster_conf, shared_lake, two_worker_cluster
from tests.infra.spark_cluster import SparkStandaloneCluster


def compare(local: dict[str, Any], local_warehouse: Path, path: Path, rows: int, last: Position,
            commit: CommitSettings, decoder: str) -> dict[str, Any]:
    """The backlog run on the cluster, beside ``local`` (the local backlog run's result, its tables under
    ``local_warehouse``); the cluster run's line printed, the comparison returned."""
    root = Path(tempfile.mkdtemp(prefix="canalbridge-bench-cluster-"))
    print("starting a Spark standalone cluster (2 workers), S3Proxy and the catalog's MariaDB", flush=True)
    with two_worker_cluster(root / "spark-cluster") as cluster, S3ProxyServer(root / "s3proxy") as store, \
            MariaDBServer(root / "catalog-db") as catalog_db:
        lake = shared_lake(catalog_db, store)
        settings = SparkSettings(master=cluster.master_url, catalog=CATALOG, warehouse=str(root / "unused"),
                                 spill_dir=str(root / "spill"), conf=cluster_conf(lake),
                                 secret_conf=lake.secret_conf(), decoder=decoder)
        statements = _statements(catalog_db)
        store_cpu, catalog_cpu = cpu_seconds(_pid(store)), cpu_seconds(_pid(catalog_db))
        with _ExecutorCpu(cluster) as executors:
            remote = in_child("cluster", _run_on_cluster, "cluster", path, last, rows, settings, commit)
        commits = max(int(remote["table_commits"]), 1)
        remote["executor_cpu_us_per_row"] = round(executors.seconds() / rows * 1e6, 2)
        remote["catalog_statements_per_table_commit"] = round((_statements(catalog_db) - statements) / commits, 1)
        remote["catalog_cpu_ms_per_table_commit"] = round(
            (cpu_seconds(_pid(catalog_db)) - catalog_cpu) / commits * 1e3)
        remote["store_cpu_ms_per_table_commit"] = round((cpu_seconds(_pid(store)) - store_cpu) / commits * 1e3)
        remote["store_objects"], remote["store_mb"] = _files_under(store.bucket_dir)
        remote["store_parquet_objects"] = sum(1 for _ in store.bucket_dir.rglob("*.parquet"))
    print(json.dumps(remote), flush=True)
    local_files, _ = _files_under(local_warehouse)
    return {"cluster_rows_per_s": remote["rows_per_s"],
            "cluster_vs_local": round(remote["rows_per_s"] / local["rows_per_s"], 2),
            "local_table_commit_s_p50": local["table_commit_s_p50"],
            "cluster_table_commit_s_p50": remote["table_commit_s_p50"],
            "cluster_added_s_per_table_commit": round(remote["table_commit_s_p50"] - local["table_commit_s_p50"], 2),
            "catalog_statements_per_table_commit": remote["catalog_statements_per_table_commit"],
            "catalog_cpu_ms_per_table_commit": remote["catalog_cpu_ms_per_table_commit"],
            "store_objects_per_table_commit": round(remote["store_objects"] / commits, 1),
            "store_parquet_objects_per_table_commit": round(remote["store_parquet_objects"] / commits, 1),
            "store_mb_per_table_commit": round(remote["store_mb"] / commits, 2),
            "store_cpu_ms_per_table_commit": remote["store_cpu_ms_per_table_commit"],
            "local_files_per_table_commit": round(local_files / max(int(local["table_commits"]), 1), 1),
            "cluster_driver_jvm_cpu_us_per_row": remote["jvm_cpu_us_per_row"],
            "cluster_executor_cpu_us_per_row": remote["executor_cpu_us_per_row"]}


def _run_on_cluster(name: str, path: Path, last: Position, rows: int, settings: SparkSettings,
                    commit: CommitSettings) -> dict[str, Any]:
    from bench.end_to_end import run  # (not at the top: bench.end_to_end imports this module)

    os.environ.update(CLIENT_ENV)  # the driver's AWS SDK, as the executors' (spark.executorEnv)
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # the driver's JVM, as the cluster's (all of it on loopback)
    return run(name, path, last, rows, settings, commit)


class _ExecutorCpu(Sampling):
    """The CPU time of the cluster's executors, sampled while they live (an executor's ends with its app)."""

    def __init__(self, cluster: SparkStandaloneCluster) -> None:
        super().__init__("executor-cpu")
        self._cluster = cluster
        self._last: dict[int, float] = {}

    def seconds(self) -> float:
        """Every executor's CPU over its life (start-up included: each starts with the run's application)."""
        return sum(self._last.values())

    def note(self) -> None:
        # (An executor's last half second before it exits is not counted: a small undercount.)
        for pid in self._cluster.executor_pids():
            try:
                self._last[pid] = cpu_seconds(pid)
            except OSError:  # exited between the listing and the read
                continue


def _statements(catalog_db: MariaDBServer) -> int:
    """The statements the catalog's MariaDB has run ('Questions'; this count's own included)."""
    [(_, value)] = catalog_db.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
    return int(value)


def _files_under(root: Path) -> tuple[int, float]:
    """How many files are under ``root``, and their MB (not Hadoop's local checksum files: no object store has
    them)."""
    sizes = [file.stat().st_size for file in root.rglob("*") if file.is_file() and file.suffix != ".crc"]
    return len(sizes), round(sum(sizes) / 2**20, 2)


def _pid(server: S3ProxyServer | MariaDBServer) -> int:
    assert server.pid is not None, f"{server} is not running"
    return server.pid
