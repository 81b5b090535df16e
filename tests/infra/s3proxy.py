"""A private S3-compatible store for the cluster tests: S3Proxy with its filesystem backend, on loopback.

S3Proxy (``make cluster-jars`` caches its jar) serves the S3 API over
plain HTTP on a free loopback port and keeps each bucket as a directory
under ``root_dir``. Requests are signed (AWS v2 or v4) with a random key
pair held only by this object. :meth:`stop` then :meth:`start` keeps the
objects and the port, as a restarted store would.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

from canalbridge.devkit.progress import die_with_parent
from tests.infra.artifacts import java_binary, s3proxy_jar
from tests.infra.processes import LOOPBACK, ServiceError, ServiceProcess, free_port, port_open, tail, wait_for

# The AWS SDK's default checksums send an ``x-amz-trailer`` header that S3Proxy refuses (501):
# a client of this store (the daemon, its executors, a reader) needs these in its environment.
CLIENT_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}


def store_client_in(spark) -> None:  # type: ignore[no-untyped-def]
    """Make a running SparkSession's JVM a client of this kind of store: the AWS SDK reads :data:`CLIENT_ENV`
    as system properties too (a session's environment is fixed when its JVM starts)."""
    jvm = spark.sparkContext._jvm
    for key, value in CLIENT_ENV.items():
        first, *rest = key.removeprefix("AWS_").lower().split("_")
        jvm.java.lang.System.setProperty("aws." + first + "".join(part.title() for part in rest), value)


class S3ProxyServer(ServiceProcess):
    """One S3Proxy process with one bucket, on 127.0.0.1."""

    stop_timeout_s = 20.0

    def __init__(self, root_dir: Path, *, bucket: str = "lake", heap: str = "256m",
                 start_timeout_s: float = 60.0) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.bucket = bucket
        self.port = free_port()
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self.access_key = "canalbridge-" + secrets.token_hex(4)
        self.secret_key = secrets.token_hex(16)
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # never shows the secret key
        return f"S3ProxyServer({self.endpoint}, bucket={self.bucket!r})"

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def bucket_dir(self) -> Path:
        """Where the bucket's objects are, one file per object."""
        return self.root_dir / "data" / self.bucket

    @property
    def log_file(self) -> Path:
        return self.root_dir / "s3proxy.log"

    def iceberg_properties(self) -> dict[str, str]:
        """An Iceberg catalog's FileIO properties for this store (S3FileIO, path-style, this key pair)."""
        return {"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", "s3.endpoint": self.endpoint,
                "s3.path-style-access": "true", "s3.access-key-id": self.access_key,
                "s3.secret-access-key": self.secret_key, "client.region": "us-east-1"}

    def start(self) -> S3ProxyServer:
        """Write the properties, create the bucket's directory, and wait until the port answers."""
        if self.running:
            return self
        jar = s3proxy_jar()
        self.bucket_dir.mkdir(parents=True, exist_ok=True)
        properties = self.root_dir / "s3proxy.properties"
        properties.write_text("\n".join([
            f"s3proxy.endpoint={self.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.access_key}",
            f"s3proxy.credential={self.secret_key}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.root_dir / 'data'}",
        ]) + "\n")
        properties.chmod(0o600)
        command = [java_binary(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-jar", str(jar),
                   "--properties", str(properties)]
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(command, cwd=self.root_dir, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             preexec_fn=die_with_parent)
        if not wait_for(lambda: port_open(LOOPBACK, self.port), self.start_timeout_s, alive=lambda: self.running):
            how = "exited" if not self.running else f"did not listen within {self.start_timeout_s} s"
            self.kill()
            raise ServiceError(f"S3Proxy on {self.endpoint} {how}; its log ends with:\n{tail(self.log_file)}")
        return self
