"""A private Kafka broker for the Kafka-mode tests: KRaft (broker and controller in one JVM), loopback only.

Started from the jars ``make kafka-jars`` caches, with its own data
directory under ``root_dir``, formatted once with a random cluster id.
Replication factors are 1 and topics are never created on first use: a
test creates each topic with the partitions it wants (:meth:`create_topic`),
so a typo in a topic name fails instead of creating an empty topic.
:meth:`stop` then :meth:`start` keeps the data (and the ports).
"""

from __future__ import annotations

import base64
import secrets
import subprocess
import uuid
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from canalbridge.devkit.progress import die_with_parent
from tests.infra.artifacts import KAFKA_VERSION, java_binary, kafka_home
from tests.infra.processes import (
    LOOPBACK,
    PORT_ATTEMPTS,
    PORT_TAKEN,
    ServiceError,
    ServiceProcess,
    free_port,
    port_open,
    read_from,
    tail,
    wait_for,
)

STARTED = "Kafka Server started"  # KafkaRaftServer logs it once broker and controller are up


class KafkaBroker(ServiceProcess):
    """One ``kafka.Kafka`` process on 127.0.0.1: a client port and a controller port."""

    stop_timeout_s = 60.0

    def __init__(
        self,
        root_dir: Path,
        *,
        port: int = 0,
        heap: str = "512m",
        properties: Mapping[str, str] | None = None,
        start_timeout_s: float = 90.0,
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.host = LOOPBACK
        self.port = port or free_port()
        self.controller_port = free_port()
        self._may_move = port == 0
        self.heap = heap
        self.properties = dict(properties or {})
        self.start_timeout_s = start_timeout_s
        # With users, clients must log in with SASL/PLAIN (user -> password); an admin user is added.
        self._users = dict(sasl_users or {})
        if self._users:
            self._users.setdefault("admin", secrets.token_hex(8))
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # never shows a password
        return f"KafkaBroker({self.bootstrap})"

    def client_security(self, user: str = "admin", password: str | None = None) -> dict[str, str]:
        """kafka-python settings to log in as ``user`` (its own password unless one is given); none without SASL."""
        if not self._users:
            return {}
        return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
                "sasl_plain_password": self._users[user] if password is None else password}

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value for clients."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.root_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.root_dir / "logs" / "server.log"

    @property
    def console_file(self) -> Path:
        return self.root_dir / "logs" / "console.log"

    def start(self) -> KafkaBroker:
        """Write the configuration, format the storage at the first start, and wait until the broker serves."""
        if self.running:
            return self
        home = kafka_home()
        java = java_binary()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._write_configuration()
            if not (self.data_dir / "meta.properties").is_file():
                self._format(home, java)
            offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            self._launch(home, java, "kafka.Kafka", str(self._server_properties))
            if wait_for(partial(self._ready, offset), self.start_timeout_s, alive=lambda: self.running):
                break
            how = "exited" if not self.running else f"was not ready within {self.start_timeout_s} s"
            self.kill()
            if self._may_move and attempt < PORT_ATTEMPTS and PORT_TAKEN in read_from(self.log_file, offset):
                self.port, self.controller_port = free_port(), free_port()
                continue
            raise ServiceError(
                f"Kafka {KAFKA_VERSION} on {self.bootstrap} {how}; server.log ends with:\n{tail(self.log_file)}\n"
                f"console:\n{tail(self.console_file, 15)}"
            )
        self._may_move = False  # clients know the port now: restarts keep it
        return self

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions (replication factor 1); waits until it has leaders."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        security = self.client_security()
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="canalbridge-devkit", **security)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()
        self._wait_for_leaders(name, partitions)

    def add_partitions(self, name: str, partitions: int) -> None:
        """Grow topic ``name`` to ``partitions`` partitions in all (as an operator does for more throughput)."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewPartitions

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="canalbridge-devkit",
                                 **self.client_security())
        try:
            admin.create_partitions({name: NewPartitions(partitions)})
        finally:
            admin.close()
        self._wait_for_leaders(name, partitions)

    def _wait_for_leaders(self, name: str, partitions: int) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="canalbridge-devkit",
                                 **self.client_security())
        try:
            if not wait_for(lambda: len(consumer.partitions_for_topic(name) or ()) == partitions, 30.0):
                raise ServiceError(f"topic {name} on {self.bootstrap} has no leaders for its {partitions} partitions")
        finally:
            consumer.close()

    # -- internals ----------------------------------------------------------------

    @property
    def _server_properties(self) -> Path:
        return self.root_dir / "conf" / "server.properties"

    def _write_configuration(self) -> None:
        conf = self._server_properties.parent
        conf.mkdir(parents=True, exist_ok=True)
        clients = "SASL_PLAINTEXT" if self._users else "PLAINTEXT"
        server = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"{clients}://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"{clients}://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": f"{clients}:{clients},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": clients,
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self._sasl_properties(),
            **self.properties,
        }
        text = "".join(f"{key}={value}\n" for key, value in server.items())
        self._server_properties.write_text("# written by tests.infra.kafka_broker\n" + text, encoding="utf-8")
        self._server_properties.chmod(0o600)  # holds the SASL passwords
        (conf / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={self.log_file}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n",
            encoding="utf-8",
        )

    def _sasl_properties(self) -> dict[str, str]:
        if not self._users:
            return {}
        users = " ".join(f'user_{user}="{password}"' for user, password in self._users.items())
        return {
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="admin" password="{self._users["admin"]}" {users};',
        }

    def _format(self, home: Path, java: str) -> None:
        self._launch(home, java, "kafka.tools.StorageTool", "format", f"--cluster-id={_cluster_id()}", "-c",
                     str(self._server_properties))
        assert self._process is not None
        code = self._process.wait(timeout=120)
        self._process = None
        if code != 0:
            raise ServiceError(f"formatting Kafka's storage in {self.data_dir} failed ({code}):\n"
                               f"{tail(self.console_file, 15)}")

    def _launch(self, home: Path, java: str, *arguments: str) -> None:
        command = [
            java, f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self._server_properties.parent / 'log4j.properties'}",
            "-cp", f"{home / 'lib'}/*", *arguments,
        ]
        with self.console_file.open("ab") as console:
            self._process = subprocess.Popen(
                command, cwd=self.root_dir, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=die_with_parent,
            )

    def _ready(self, offset: int) -> bool:
        return port_open(self.host, self.port) and STARTED in read_from(self.log_file, offset)


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, as StorageTool makes them.

    It may begin with '-': pass it as ``--cluster-id=ID``, not as a separate argument.
    """
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
