"""The ``[spark]`` settings: master, free-form conf, and the Iceberg catalog."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SparkSettings:
    """How to build the daemon's one SparkSession.

    ``conf`` passes through as is (any ``spark.*`` key, including Iceberg
    catalog keys such as ``spark.sql.catalog.lake.type = "rest"``). When it
    does not define the catalog named ``catalog``, a Hadoop catalog with its
    warehouse at ``warehouse`` is configured.
    """

    master: str = "local[*]"
    app_name: str = "canalbridge"
    catalog: str = "lake"
    warehouse: str = "warehouse"
    conf: dict[str, str] = field(default_factory=dict)
    # Staged rows kept in memory per channel before spilling to Parquet in spill_dir.
    spill_rows: int = 50_000  # per channel; about 40 MB of Python objects for a 10-column table
    spill_dir: str = "state/spill"
    # Who decodes Canal's RowChange bytes: "jvm" (Spark, with the decoder `make decoder-jar`
    # builds), "python" (the channel's thread), or "auto": the JVM when its jar is there.
    decoder: str = "auto"
