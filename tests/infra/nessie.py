"""A private Project Nessie server on loopback: an Iceberg REST catalog whose multi-table commit is one Nessie commit.

``make nessie`` caches the server's runner jar, which needs a Java 21 or newer
(:func:`~tests.infra.artifacts.newer_java_binary`). Its version store is in
memory, so a restart forgets every table. It keeps tables only in an object
store (it refuses ``file://`` warehouses): an S3Proxy here. Its settings, the
store's keys among them, are in ``config/application.properties`` under
``root_dir`` (0600), which Quarkus reads from its working directory.

Every table lives on Nessie's branch ``main``, and each Nessie commit has a
hash. A reader that loads tables one after the other at ``main`` may see a
commit land between two loads; loaded at one hash (:meth:`NessieServer.table`
with ``at``) they are all as that commit left them.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from canalbridge.devkit.progress import die_with_parent
from tests.infra.artifacts import nessie_jar, newer_java_binary
from tests.infra.processes import LOOPBACK, ServiceError, ServiceProcess, free_port, http_ok, tail, wait_for
from tests.infra.s3proxy import CLIENT_ENV, S3ProxyServer

BRANCH = "main"
SECRET = "canalbridge.store"  # the name its settings give the store's key pair


class RestError(RuntimeError):
    """An Iceberg REST or Nessie request the server refused: its HTTP status and error body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        error = body.get("error")  # (Iceberg's errors nest it; Nessie's own API's do not)
        super().__init__(f"HTTP {status}: {error.get('message') if isinstance(error, dict) else body.get('message')}")
        self.status = status
        self.body = body


class NessieServer(ServiceProcess):
    """One Nessie process on 127.0.0.1, its warehouse under ``store``'s bucket; ``uri`` is an Iceberg REST
    client's ``uri``."""

    stop_timeout_s = 20.0

    def __init__(self, root_dir: Path, store: S3ProxyServer, *, heap: str = "512m",
                 start_timeout_s: float = 90.0) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.store = store
        self.port = free_port()
        self.management_port = free_port()
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"NessieServer({self.uri}, store={self.store!r})"

    @property
    def uri(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/iceberg/"

    @property
    def _api(self) -> str:
        """Nessie's own REST API (version 2)."""
        return f"http://{LOOPBACK}:{self.port}/api/v2/"

    @property
    def warehouse(self) -> str:
        return f"s3://{self.store.bucket}/nessie"

    @property
    def log_file(self) -> Path:
        return self.root_dir / "nessie.log"

    def start(self) -> NessieServer:
        """Write the settings, start the server, and wait until its Iceberg REST catalog answers."""
        if self.running:
            return self
        java, jar = newer_java_binary(), nessie_jar()
        config = self.root_dir / "config"
        config.mkdir(parents=True, exist_ok=True)
        (self.root_dir / "tmp").mkdir(exist_ok=True)
        options = "nessie.catalog.service.s3.default-options"
        settings = {
            "quarkus.http.host": LOOPBACK, "quarkus.http.port": str(self.port),
            "quarkus.management.host": LOOPBACK, "quarkus.management.port": str(self.management_port),
            "quarkus.log.file.enable": "false",
            "nessie.version.store.type": "IN_MEMORY",
            "nessie.catalog.default-warehouse": "warehouse",
            "nessie.catalog.warehouses.warehouse.location": self.warehouse,
            f"{options}.endpoint": self.store.endpoint, f"{options}.path-style-access": "true",
            f"{options}.region": "us-east-1", f"{options}.request-signing-enabled": "false",
            f"{options}.access-key": f"urn:nessie-secret:quarkus:{SECRET}",
            f"{SECRET}.name": self.store.access_key, f"{SECRET}.secret": self.store.secret_key,
        }
        properties = config / "application.properties"
        properties.touch(mode=0o600)
        properties.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        command = [java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:-UsePerfData",
                   f"-Djava.io.tmpdir={self.root_dir / 'tmp'}", "-jar", str(jar)]
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(command, cwd=self.root_dir, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             env={**os.environ, **CLIENT_ENV}, preexec_fn=die_with_parent)
        if not wait_for(lambda: http_ok(self.uri + "v1/config"), self.start_timeout_s, alive=lambda: self.running):
            how = "exited" if not self.running else f"did not answer within {self.start_timeout_s} s"
            self.kill()
            raise ServiceError(f"Nessie on {self.uri} {how}; its log ends with:\n{tail(self.log_file)}")
        return self

    # -- the Iceberg REST catalog and Nessie's own API, as a test uses them --------------------------------

    def iceberg(self, method: str, path: str, body: dict[str, Any] | None = None, *,
                at: str | None = None) -> dict[str, Any]:
        """An Iceberg REST request on ``BRANCH`` (or on its commit ``at``, a hash): ``path`` follows
        ``/v1/{prefix}/``."""
        prefix = urllib.parse.quote(BRANCH if at is None else f"{BRANCH}@{at}", safe="")
        return self._request(method, f"{self.uri}v1/{prefix}/{path}", body)

    def head(self) -> str:
        """The hash of ``BRANCH``'s newest commit."""
        reference = self._request("GET", f"{self._api}trees/{BRANCH}", None)
        return str(reference["reference"]["hash"])

    def history(self, count: int) -> list[dict[str, Any]]:
        """``BRANCH``'s newest ``count`` commits, newest first (Nessie's log entries)."""
        log = self._request("GET", f"{self._api}trees/{BRANCH}/history"
                                   f"?max-records={count}", None)
        return list(log["logEntries"])[:count]

    def table(self, namespace: str, name: str, *, at: str | None = None) -> dict[str, Any]:
        """A table's metadata, as ``BRANCH`` holds it now or at commit ``at``."""
        return dict(self.iceberg("GET", f"namespaces/{namespace}/tables/{name}", at=at)["metadata"])

    def _request(self, method: str, url: str, body: dict[str, Any] | None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {"message": raw.decode(errors="replace")[:500]}
            raise RestError(exc.code, parsed) from None
        return json.loads(text) if text else {}
