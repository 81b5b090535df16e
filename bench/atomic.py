"""``bench.end_to_end --atomic``: what publishing every commit of a job's targets in one catalog commit costs.

After the usual runs, the backlog runs twice more on the same warm Spark, into tables of a Nessie server (an
Iceberg REST catalog, tables in an S3Proxy bucket, both on this machine): first as any job commits, each table
on its own, then with ``[job.cuts] atomic``, each table's share staged and all published in one Nessie commit.
The first run also warms the catalog's and the store's clients. :func:`compare` returns what goes into the
summary line: the rows/s of both runs, each table's apply (its staging, in the atomic run) and each publish.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from canalbridge.sync.channel.sink import CatalogPublisher
from spark_sink.catalog_commit import IcebergPublisher
from spark_sink.session import get_spark
from spark_sink.settings import SparkSettings
from tests.infra.nessie import NessieServer
from tests.infra.s3proxy import S3ProxyServer, store_client_in

CATALOG = "nessie"

# run(name, catalog, publisher): one backlog run into CATALOG.NAME.*, its figures (bench.end_to_end.run).
Run = Callable[[str, str, CatalogPublisher | None], dict[str, Any]]


def compare(run: Run, spark_settings: SparkSettings, timeout_s: float) -> dict[str, Any]:
    """The backlog into Nessie without and with atomic publishing; each run's line printed, the comparison
    returned."""
    root = Path(tempfile.mkdtemp(prefix="canalbridge-bench-atomic-"))
    print("starting S3Proxy and a Nessie server (an Iceberg REST catalog)", flush=True)
    with S3ProxyServer(root / "s3") as store, NessieServer(root / "nessie", store) as nessie:
        spark = get_spark(spark_settings)
        store_client_in(spark)
        prefix = f"spark.sql.catalog.{CATALOG}"
        for key, value in {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "rest",
                           f"{prefix}.uri": nessie.uri, f"{prefix}.s3.access-key-id": store.access_key,
                           f"{prefix}.s3.secret-access-key": store.secret_key}.items():
            spark.conf.set(key, value)
        plain = run("nessie_plain", CATALOG, None)
        print(json.dumps(plain), flush=True)
        atomic = run("nessie_atomic", CATALOG, IcebergPublisher(lambda: get_spark(spark_settings), timeout_s))
        print(json.dumps(atomic), flush=True)
    return {"nessie_plain_rows_per_s": plain["rows_per_s"], "nessie_atomic_rows_per_s": atomic["rows_per_s"],
            "atomic_share_of_plain": round(atomic["rows_per_s"] / plain["rows_per_s"], 3),
            "nessie_plain_table_commit_s_p50": plain["table_commit_s_p50"],
            "atomic_table_stage_s_p50": atomic["table_commit_s_p50"],
            "atomic_publishes": atomic["catalog_publishes"], "atomic_publish_s_p50": atomic["catalog_publish_s_p50"],
            "atomic_publish_s_max": atomic["catalog_publish_s_max"]}
