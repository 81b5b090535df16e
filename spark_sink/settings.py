"""The ``[spark]`` settings: master, free-form conf, and the Iceberg catalog."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from canalbridge.sync.options import local_path, non_empty, one_of, positive, setting

MASK_SALT_ENV = "CANALBRIDGE_MASK_SALT"


@dataclass(frozen=True)
class SparkSettings:
    """How to build the daemon's one SparkSession.

    ``conf`` passes through as is (any ``spark.*`` key, including Iceberg
    catalog keys such as ``spark.sql.catalog.lake.type = "rest"``). When it
    does not define the catalog named ``catalog``, a Hadoop catalog with its
    warehouse at ``warehouse`` is configured.
    """

    SECTION: ClassVar[str] = "spark"

    master: str = setting("local[*]", doc="any Spark master", check=non_empty)
    app_name: str = setting("canalbridge", doc="the Spark application's name", check=non_empty)
    catalog: str = setting("lake", doc="the Iceberg catalog the targets name; a Hadoop catalog at `warehouse` "
                                       "unless `conf` defines it", check=non_empty)
    warehouse: str = setting("warehouse", default_text="`state_dir/warehouse`", check=non_empty,
                             doc="the default Hadoop catalog's warehouse; relative to the config file")
    conf: dict[str, str] = setting(
        {}, doc="any `spark.*` key, passed through; without `spark.driver.memory` here the driver's heap is 2g "
                "(not Spark's 1g), which also overrides `spark-defaults.conf` and `SPARK_DRIVER_MEMORY`")
    secret_conf: dict[str, str] = setting(
        {}, name="conf_env", secret=True,
        doc="`spark.*` keys whose values are secrets, each naming the environment variable that holds its value "
            "(a catalog's `jdbc.password`, an object store's `s3.secret-access-key`): the file then holds no secret")
    # About 40 MB of Python objects for a 10-column table.
    spill_rows: int = setting(50_000, check=positive,
                              doc="staged rows per channel kept in memory before spilling to Parquet (entries, with "
                                  "the JVM decoder)")
    spill_dir: str = setting("state/spill", default_text="`state_dir/spill`", check=local_path,
                             doc="where staged rows go as files for Spark to read at commit; with `staging = "
                                 "\"files\"`, a directory every executor reads at the same path; relative to the "
                                 "config file")
    staging: str = setting("auto", check=one_of("auto", "files", "driver"),
                           doc="how staged rows reach Spark at commit: `files` (Parquet files the executors read "
                               "under `spill_dir`), `driver` (Arrow files the driver reads and ships to the "
                               "executors in their tasks), `auto` (`files` with a `local` master, else `driver`)")
    decoder: str = setting("auto", check=one_of("auto", "jvm", "python"),
                           doc="who decodes Canal's rows: `jvm` (Spark, with the decoder jar a wheel carries, or `make "
                               "decoder-jar` builds in a checkout), `python` (the channel's thread), `auto` (the JVM "
                               "when its jar is there)")

    upsert_deletes: str = setting(
        "auto", check=one_of("auto", "position", "equality"),
        doc="how an upsert commit removes the rows it replaces: `position` (finds them with a join that reads the "
            "target's key column and writes position deletes: the join grows with the table), `equality` (an "
            "equality delete per changed key and no read of the target, as Flink's Iceberg sink writes: a commit "
            "costs the same at any table size, readers match rows against the deletes until compaction, which "
            "then rewrites every file they apply to; needs the decoder jar and a format 2 or 3 target whose "
            "identifier fields are the key (a partitioned one's deletes apply in every partition), and other "
            "targets and snapshot chunks keep `position`), `auto` (`equality` when the decoder jar is on "
            "Spark's classpath, else `position`); see the performance page")

    jars_dir: str | None = setting(
        None, check=non_empty, default_text="(none)",
        doc="a directory of jars, for a host that cannot reach a Maven repository: every jar in it joins "
            "`spark.jars`, and a jar the config needs (the Iceberg runtime, a JDBC driver, Iceberg's AWS bundle) "
            "that is not there stops the start, naming its Maven coordinates; without it, Spark fetches them with "
            "`spark.jars.packages`; relative to the config file")
    mask_salt_env: str = setting(
        MASK_SALT_ENV, check=non_empty,
        doc="the environment variable that holds the salt (at least 16 characters) the channels' `mask` columns "
            "are keyed by; read only when a channel masks a column")
    # Not a key of the file: the loader sets it when a job has a [job.snapshot], whose reads need a JDBC driver.
    reads_sources: bool = False
    # Not a key of the file: the loader reads it from mask_salt_env when a channel masks a column. Never shown.
    mask_salt: str = dataclasses.field(default="", repr=False)

    @property
    def stages_through_driver(self) -> bool:
        """Whether staged rows reach the executors through the driver (see ``staging``)."""
        return self.staging == "driver" or (self.staging == "auto" and not self.master.startswith("local"))
