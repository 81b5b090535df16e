"""A ZooKeeper server for the tests of Canal's HA mode: the ZooKeeper jar Canal ships, on 127.0.0.1.

Sessions are short (2 to 4 s, ``minSessionTimeout`` and ``maxSessionTimeout``
cap what clients ask for): a Canal server killed with SIGKILL loses its
running node within seconds, and its standby takes the destination over
after Canal's own 5 s delay.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from canalbridge.devkit.progress import die_with_parent
from tests.infra.artifacts import canal_home, java_binary
from tests.infra.processes import LOOPBACK, ServiceError, ServiceProcess, free_port, tail, wait_for

SESSION_TIMEOUT_MS = (2000, 4000)  # the least and the most a session may ask for


class ZooKeeperServer(ServiceProcess):
    """One standalone ZooKeeper server with its own data directory under ``root_dir``; :meth:`stop` then
    :meth:`start` keeps the data and the port."""

    stop_timeout_s = 15.0

    def __init__(self, root_dir: Path, *, heap: str = "128m", start_timeout_s: float = 60.0) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.host = LOOPBACK
        self.port = free_port()
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port``, as ``canal.zkServers`` and clients name it."""
        return f"{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.root_dir / "zookeeper.log"

    def start(self) -> ZooKeeperServer:
        if self.running:
            return self
        data = self.root_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.root_dir / "zoo.cfg"
        least, most = SESSION_TIMEOUT_MS
        config.write_text("\n".join([
            "tickTime=1000", f"dataDir={data}", f"clientPort={self.port}", f"clientPortAddress={self.host}",
            f"minSessionTimeout={least}", f"maxSessionTimeout={most}", "admin.enableServer=false",
            "4lw.commands.whitelist=ruok", ""]), encoding="utf-8")
        logback = self.root_dir / "logback.xml"  # (without one, logback logs every packet at DEBUG)
        logback.write_text(_LOGBACK, encoding="utf-8")
        home = canal_home()
        command = [java_binary(), f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseSerialGC",
                   "-Dzookeeper.admin.enableServer=false", f"-Dlogback.configurationFile={logback}",
                   "-cp", f"{home / 'lib'}/*",
                   "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(command, cwd=self.root_dir, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             preexec_fn=die_with_parent)
        if not wait_for(self._answers, self.start_timeout_s, alive=lambda: self.running):
            self.kill()
            raise ServiceError(f"ZooKeeper on {self.address} did not answer 'ruok'; its log ends with:\n"
                               f"{tail(self.log_file)}")
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=2) as connection:
                connection.sendall(b"ruok")
                return connection.recv(4) == b"imok"
        except OSError:
            return False


_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<!-- written by tests.infra.zookeeper -->
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="OUT"/></root>
</configuration>
"""
