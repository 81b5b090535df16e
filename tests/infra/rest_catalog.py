"""A private Iceberg REST catalog server, on loopback: Iceberg's REST adapter over a JdbcCatalog in SQLite.

``make rest-catalog`` caches the server's jars and compiles our launcher
(``deploy/maven/rest/launcher``), which binds 127.0.0.1 only. The catalog's
tables are kept under ``warehouse`` (a directory, or an S3 path with the
store's FileIO properties); its own state is one SQLite file under
``root_dir``. :meth:`stop` then :meth:`start` keeps both and the port, as
a restarted catalog would.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from canalbridge.devkit.progress import die_with_parent
from tests.infra.artifacts import cluster_jar, java_binary, rest_catalog_home
from tests.infra.processes import LOOPBACK, ServiceError, ServiceProcess, free_port, http_ok, tail, wait_for

LAUNCHER_CLASS = "CanalBridgeRestCatalog"


class RestCatalogServer(ServiceProcess):
    """One REST catalog process on 127.0.0.1; ``uri`` is what a client's ``uri`` property names."""

    stop_timeout_s = 20.0

    def __init__(self, root_dir: Path, warehouse: str, *, properties: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, heap: str = "256m", start_timeout_s: float = 60.0) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.warehouse = warehouse
        self.properties = dict(properties or {})  # e.g. an S3 store's FileIO properties (secrets: the file is 0600)
        self.env = dict(env or {})
        self.port = free_port()
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # never shows the store's keys
        return f"RestCatalogServer({self.uri}, warehouse={self.warehouse!r})"

    @property
    def uri(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    @property
    def log_file(self) -> Path:
        return self.root_dir / "rest-catalog.log"

    def spark_conf(self, catalog: str) -> dict[str, str]:
        """The keys that make ``catalog`` this server's client in Spark (a store's FileIO keys come apart)."""
        prefix = f"spark.sql.catalog.{catalog}"
        return {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "rest", f"{prefix}.uri": self.uri}

    def start(self) -> RestCatalogServer:
        """Write the settings file, start the server, and wait until it answers ``GET /v1/config``."""
        if self.running:
            return self
        home = rest_catalog_home()
        self.root_dir.mkdir(parents=True, exist_ok=True)
        (self.root_dir / "tmp").mkdir(exist_ok=True)
        settings = self.root_dir / "catalog.properties"
        lines = {"rest.host": LOOPBACK, "rest.port": str(self.port), "warehouse": self.warehouse,
                 "uri": f"jdbc:sqlite:{self.root_dir / 'catalog.db'}", **self.properties}
        settings.write_text("".join(f"{key}={_escaped(value)}\n" for key, value in lines.items()))
        settings.chmod(0o600)
        classpath = [str(home / "lib" / "*"), str(home / "launcher")]
        if self.properties.get("io-impl", "").endswith("S3FileIO"):
            classpath.append(str(cluster_jar("iceberg-aws-bundle")))
        # (its own temporary directory: SQLite's driver unpacks its native library there)
        command = [java_binary(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:-UsePerfData",
                   f"-Djava.io.tmpdir={self.root_dir / 'tmp'}", "-cp", ":".join(classpath), LAUNCHER_CLASS,
                   str(settings)]
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(command, cwd=self.root_dir, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             env={**os.environ, **self.env},
                                             preexec_fn=die_with_parent)
        if not wait_for(lambda: http_ok(self.uri + "v1/config"), self.start_timeout_s, alive=lambda: self.running):
            how = "exited" if not self.running else f"did not answer within {self.start_timeout_s} s"
            self.kill()
            raise ServiceError(f"the REST catalog on {self.uri} {how}; its log ends with:\n{tail(self.log_file)}")
        return self


def _escaped(value: str) -> str:
    # java.util.Properties reads a backslash as an escape and ':' '=' in keys only; values need the backslashes.
    return value.replace("\\", "\\\\").replace("\n", "\\n")
