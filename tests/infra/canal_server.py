"""A real Canal server for the real-stack tests, started from the jars ``make canal-jars`` caches.

Canal's own server modules (from Maven Central) run under the small launcher
in ``deploy/maven/canal/launcher`` (Central has no deployer for them). This
module writes Canal's own ``canal.properties`` and ``instance.properties``
(``tests/infra/canal_config.py``: Canal's defaults, then the keys changed
here): loopback only, no ZooKeeper, tcp mode, a client user and password, file
meta (``<data>/<destination>/meta.dat``, so a restart resumes from Canal's own
cursor), an explicit heap, and Canal's schema history as it ships (H2 files
under each destination's data directory), in a MariaDB database
(:data:`HISTORY_MYSQL`) or off (:data:`HISTORY_OFF`). With :class:`KafkaMode`
it publishes to Kafka instead of serving clients (its Kafka producer plugin on
the classpath). Each destination reads the private MariaDB; at its first start
its binlog position is pinned with ``SHOW MASTER STATUS`` (without it Canal
starts at the binlog end whenever its parser connects, losing what was written
in between).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from canalbridge.canal import CanalConnector
from canalbridge.devkit.progress import die_with_parent
from canalbridge.sync.source.canal.settings import CanalSettings
from tests.infra import canal_config
from tests.infra.artifacts import LAUNCHER_CLASS, canal_home, canal_kafka_plugin, java_binary
from tests.infra.mariadb import MariaDBServer
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

# Canal's parser logs this (INFO, MysqlConnection) when it sends the binlog
# dump command, after it found its start position: the destination is live.
PARSER_READY = "COM_BINLOG_DUMP with position"
# Our launcher logs this once the server listens: in an HA cluster a standby server is ready then, running nothing.
LISTENING = "canal server listening on"


def canal_passwd(password: str) -> str:
    """``canal.passwd`` for a client password: hex SHA1(SHA1(password)), MySQL's PASSWORD() without ``*``."""
    return hashlib.sha1(hashlib.sha1(password.encode("utf-8")).digest()).hexdigest()

# Canal's schema history (canal.instance.tsdb.*): its default, H2 files under each destination's data
# directory; tables in a MariaDB database (Canal's mysql-tsdb.xml: the source's, or `history_db`); or none.
HISTORY_H2 = "h2"
HISTORY_MYSQL = "mysql"
HISTORY_OFF = "off"
HISTORIES = (HISTORY_H2, HISTORY_MYSQL, HISTORY_OFF)
_HISTORY_DATABASES = itertools.count(1)  # one history database per Canal server of this process

# Server ids of the parsers, unique in this process: every Canal server of a test run reads the same MariaDB,
# and MariaDB drops a replica's binlog dump when another registers with its id (error 4052): two Canal
# servers with one id cut each other off in turn, and a test that waits on one of them times out.
_SLAVE_IDS = itertools.count(1000)

@dataclass(frozen=True)
class CanalDestination:
    """One Canal instance (destination) over the private MariaDB.

    ``filter_regex`` is Canal's table filter (Canal 1.1.x splits it at every
    comma); ``properties`` adds or overrides any ``canal.instance.*`` key
    (``canal.instance.memory.buffer.size``, ``canal.instance.filter.query.dml``, ...).
    """

    name: str
    filter_regex: str = r".*\..*"
    black_regex: str = r"mysql\..*"
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", self.name):
            raise ValueError(f"destination name {self.name!r}: use letters, digits, '_' and '-'")


@dataclass(frozen=True)
class KafkaMode:
    """Run Canal with ``canal.serverMode = kafka``: it publishes every batch to Kafka and opens no client port.

    ``flat_message`` is ``canal.mq.flatMessage`` (JSON when true, Canal's
    default; protobuf ``Packet`` records when false). ``producer`` adds
    ``kafka.*`` keys (passed to Canal's producer without the prefix). Each
    destination names its topic and partitioning with ``canal.mq.*`` keys
    in its ``properties``.
    """

    bootstrap: str
    flat_message: bool = True
    producer: Mapping[str, str] = field(default_factory=dict)

    def server_properties(self) -> dict[str, str]:
        return {
            "canal.serverMode": "kafka",
            "canal.mq.flatMessage": str(self.flat_message).lower(),
            # Canal's code default drops transaction begin/end entries in MQ mode;
            # its stock canal.properties keeps them, as the bridge needs.
            "canal.instance.filter.transaction.entry": "false",
            "kafka.bootstrap.servers": self.bootstrap,
            "kafka.acks": "all",
            **{f"kafka.{key}": value for key, value in self.producer.items()},
        }


class CanalServer(ServiceProcess):
    """A Canal server process on 127.0.0.1 with its own conf and data directories under ``root_dir``.

    :meth:`stop` then :meth:`start` (or :meth:`restart`) keeps the data
    directory, so each destination resumes from its meta.dat cursor. A clean
    stop runs Canal's shutdown hook, which flushes meta.dat; after
    :meth:`kill` it holds what the last periodic flush (1 s) wrote.
    """

    stop_timeout_s = 30.0

    def __init__(
        self,
        root_dir: Path,
        mariadb: MariaDBServer,
        destinations: Iterable[CanalDestination] = (CanalDestination("example"),),
        *,
        user: str = "canal",
        password: str = "canal-secret",
        port: int = 0,
        heap_min: str = "128m",
        heap_max: str = "512m",
        server_properties: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = (),
        start_timeout_s: float = 120.0,
        kafka: KafkaMode | None = None,
        history: str = HISTORY_H2,
        history_db: MariaDBServer | None = None,
        zookeeper: str | None = None,
        pinned: Mapping[str, tuple[str, int, int]] | None = None,
    ) -> None:
        """``history_db``: where a :data:`HISTORY_MYSQL` history lives (default: ``mariadb``, the source; then
        Canal's own writes to it are transactions in the binlog it reads). ``zookeeper``: a server of an HA
        cluster, with ``canal.zkServers`` and the cursors there (Canal's default-instance.xml); ``pinned``: the
        start positions of another server of the cluster, which every server must share."""
        if history not in HISTORIES:
            raise ValueError(f"history {history!r}: one of {', '.join(HISTORIES)}")
        self.root_dir = Path(root_dir).resolve()
        self.mariadb = mariadb
        self.destinations: dict[str, CanalDestination] = {}
        self._slave_ids: dict[str, int] = {}
        for destination in destinations:
            self._add(destination)
        if not self.destinations:
            raise ValueError("a Canal server needs at least one destination")
        self.host = LOOPBACK
        self.port = port or free_port()
        self._may_move = port == 0  # a port we picked may be taken by someone else before we bind it
        self.user = user
        self._password = password
        self.heap_min = heap_min
        self.heap_max = heap_max
        self.server_properties = dict(server_properties or {})
        self.jvm_options = tuple(jvm_options)
        self.start_timeout_s = start_timeout_s
        self.kafka = kafka
        self.history = history
        self.history_db = history_db or mariadb
        self.history_database = f"canal_tsdb_{next(_HISTORY_DATABASES)}" if history == HISTORY_MYSQL else ""
        self._history_password = os.urandom(8).hex()
        self._history_ready = False
        self.zookeeper = zookeeper
        self._pinned: dict[str, tuple[str, int, int]] = dict(pinned or {})
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # never shows the password
        return (f"CanalServer({self.host}:{self.port}, destinations={sorted(self.destinations)}, "
                f"history={self.history})")

    # -- paths ------------------------------------------------------------------

    @property
    def conf_dir(self) -> Path:
        return self.root_dir / "conf"

    @property
    def data_dir(self) -> Path:
        return self.root_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.root_dir / "logs" / "canal.log"

    @property
    def console_file(self) -> Path:
        return self.root_dir / "logs" / "console.log"

    def meta_file(self, destination: str) -> Path:
        """Where Canal keeps a destination's client cursors."""
        return self.data_dir / destination / "meta.dat"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> CanalServer:
        """Write the configuration, start the JVM and wait until every destination's parser is dumping."""
        if self.running:
            return self
        home = canal_home()
        java = java_binary()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._write_configuration()
            offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            self._launch(home, java)
            if wait_for(partial(self._ready, offset), self.start_timeout_s, alive=lambda: self.running):
                break
            how = "exited" if not self.running else f"was not ready within {self.start_timeout_s} s"
            self.kill()
            if self._may_move and attempt < PORT_ATTEMPTS and PORT_TAKEN in read_from(self.log_file, offset):
                self.port = free_port()
                continue
            raise ServiceError(
                f"Canal on {self.address} {how} (waiting for port {self.port} and '{PARSER_READY}' for "
                f"{sorted(self.destinations)}); canal.log ends with:\n{self._redact(tail(self.log_file))}\n"
                f"console:\n{self._redact(tail(self.console_file, 15))}"
            )
        self._may_move = False  # from now on clients know the port: restarts keep it
        return self

    def _launch(self, home: Path, java: str) -> None:
        command = [
            java,
            f"-Xms{self.heap_min}",
            f"-Xmx{self.heap_max}",
            "-XX:+UseSerialGC",
            "-Duser.timezone=UTC",
            "-Dfile.encoding=UTF-8",
            f"-Dlogback.configurationFile={self.conf_dir / 'logback.xml'}",
            *self.jvm_options,
            "-cp",
            ":".join([str(self.conf_dir), str(home / "launcher"), f"{home / 'lib'}/*",
                      *([str(canal_kafka_plugin())] if self.kafka is not None else [])]),
            LAUNCHER_CLASS,
            str(self.conf_dir),
        ]
        with self.console_file.open("ab") as console:
            self._process = subprocess.Popen(
                command,
                cwd=self.root_dir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def add_destination(self, destination: CanalDestination) -> None:
        """Add a destination starting at the binlog's end now (what is written from here on reaches it, even
        while the server is stopped); a running server restarts to load it (Canal's auto-scan is off)."""
        if destination.name in self.destinations:
            raise ValueError(f"destination {destination.name!r} exists already")
        self._add(destination)
        self._pin(destination.name)
        if self.running:
            self.restart()

    def retire(self, name: str) -> None:
        """Leave ``name`` out of the server from its next (re)start on: each destination's parser reads the
        whole binlog, so a session that kept every destination it ever added spent a core on parsers no
        test reads any more. A running server is not restarted for it."""
        if len(self.destinations) == 1 and name in self.destinations:
            raise ValueError("a Canal server needs at least one destination")
        self.destinations.pop(name, None)
        self._pinned.pop(name, None)

    def _add(self, destination: CanalDestination) -> None:
        self.destinations[destination.name] = destination
        self._slave_ids[destination.name] = next(_SLAVE_IDS)

    def _pin(self, name: str) -> None:
        """Pin a destination that has no cursor yet to the binlog's end, with the millisecond before this
        second as its time."""
        if name not in self._pinned and not self.meta_file(name).exists():
            # With the schema history on, Canal needs a start position's time: given a file and offset alone, it
            # looks for the time by rewinding to the last transaction boundary before the offset, and streams
            # from there. The time is the millisecond before the current second: every DDL the destination's
            # history will hold comes after the position, so in this second or later (the binlog counts
            # seconds). A DDL of the pinned time or before would make Canal 1.1.7 compare the position's
            # server id, which a configured position has none of (a NullPointerException in
            # DatabaseTableMeta.applyHistoryOnMemory, retried for ever).
            self._pinned[name] = (*self.mariadb.master_status(), int(time.time()) * 1000 - 1)

    def slave_id(self, destination: str) -> int:
        """The server id ``destination``'s parser registers with MariaDB (fixed from when it was added)."""
        return self._slave_ids[destination]

    def connector(
        self, destination: str = "example", *, client_id: str = "1001", so_timeout_s: float = 60.0
    ) -> CanalConnector:
        """A canalbridge connector to ``destination`` with this server's credentials (not connected yet)."""
        return CanalConnector(
            self.host,
            self.port,
            destination,
            username=self.user,
            password=self._password,
            client_id=client_id,
            so_timeout_s=so_timeout_s,
        )

    def canal_settings(self, destination: str, **options: Any) -> CanalSettings:
        """A sync job's settings for ``destination`` on this server (on its cluster, in HA), with its client
        credentials."""
        if self.zookeeper is not None:
            return CanalSettings("", 0, destination, username=self.user, password=self._password,
                                 zk_servers=self.zookeeper, **options)
        return CanalSettings(self.host, self.port, destination, username=self.user, password=self._password,
                             **options)

    @property
    def pinned(self) -> dict[str, tuple[str, int, int]]:
        """Each destination's start position (file, offset, time), as another server of a cluster must have it."""
        return dict(self._pinned)

    # -- internals ----------------------------------------------------------------

    def _redact(self, text: str) -> str:
        # Canal itself logs the MariaDB password (its "Register slave" line).
        for secret in (self.mariadb.canal_password, self._password, self._history_password):
            if secret:
                text = text.replace(secret, "******")
        return text

    def _ready(self, offset: int) -> bool:
        if self.kafka is None and not port_open(self.host, self.port):
            return False
        try:
            with self.log_file.open("rb") as log:
                log.seek(offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return False
        if self.zookeeper is not None:  # (a standby runs no destination: the cluster decides who does)
            return LISTENING in text
        ready = {
            match.group(1) for match in re.finditer(r"\[([A-Za-z0-9_-]+)\][^\n]*" + PARSER_READY, text)
        }
        return set(self.destinations) <= ready

    def _write_configuration(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "logback.xml").write_text(_logback_xml(self.log_file), encoding="utf-8")
        server = {
            "canal.ip": self.host,  # loopback only: the stock empty value listens on every interface
            "canal.port": str(self.port),
            "canal.user": self.user,
            "canal.passwd": canal_passwd(self._password) if self._password else "",
            "canal.destinations": ",".join(self.destinations),
            "canal.conf.dir": str(self.conf_dir),
            "canal.file.data.dir": str(self.data_dir),
            "canal.auto.scan": "false",  # add_destination restarts the server instead
            # What the bridge needs of the binlog (Canal accepts more by default).
            "canal.instance.binlog.format": "ROW",
            "canal.instance.binlog.image": "FULL",
            **self._history_properties(),
            **({"canal.zkServers": self.zookeeper,
                "canal.instance.global.spring.xml": "classpath:spring/default-instance.xml"}
               if self.zookeeper is not None else {}),
            **(self.kafka.server_properties() if self.kafka is not None else {}),
            **self.server_properties,
        }
        canal_config.write(self.conf_dir / "canal.properties",
                           canal_config.render(canal_config.SERVER_DEFAULTS, server, what="canal.properties"))
        for destination in self.destinations.values():
            self._write_instance(destination)

    def _history_properties(self) -> dict[str, str]:
        if self.history == HISTORY_OFF:
            return {"canal.instance.tsdb.enable": "false"}
        if self.history == HISTORY_H2:
            return {}  # Canal's default: H2 under canal.file.data.dir/<destination>
        if not self._history_ready:
            self.history_db.history_user("canal_tsdb", self._history_password, self.history_database)
            self._history_ready = True
        return {
            "canal.instance.tsdb.spring.xml": "classpath:spring/tsdb/mysql-tsdb.xml",
            "canal.instance.tsdb.url": f"jdbc:mysql://{self.history_db.address}/{self.history_database}?useSSL=false",
            "canal.instance.tsdb.dbUsername": "canal_tsdb",
            "canal.instance.tsdb.dbPassword": self._history_password,
        }

    def _write_instance(self, destination: CanalDestination) -> None:
        self._pin(destination.name)
        journal, position, timestamp = self._pinned.get(destination.name, ("", 0, 0))
        instance = {
            "canal.instance.mysql.slaveId": str(self.slave_id(destination.name)),
            "canal.instance.master.address": self.mariadb.address,
            # Used only while the destination has no meta.dat.
            "canal.instance.master.journal.name": journal,
            "canal.instance.master.position": str(position) if journal else "",
            "canal.instance.master.timestamp": str(timestamp) if journal else "",
            "canal.instance.dbUsername": self.mariadb.canal_user,
            "canal.instance.dbPassword": self.mariadb.canal_password,
            "canal.instance.filter.regex": destination.filter_regex,
            "canal.instance.filter.black.regex": destination.black_regex,
            **({"canal.instance.tsdb.enable": "false"} if self.history == HISTORY_OFF else {}),
            **destination.properties,
        }
        directory = self.conf_dir / destination.name
        directory.mkdir(parents=True, exist_ok=True)
        canal_config.write(directory / "instance.properties",
                           canal_config.render(canal_config.INSTANCE_DEFAULTS, instance, what="instance.properties"))


def _logback_xml(log_file: Path) -> str:
    """Our logback configuration: INFO to one file, the destination in brackets on every line."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- written by tests.infra.canal_server -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log_file}</file>
    <append>true</append>
    <encoder>
      <pattern>%d{{yyyy-MM-dd HH:mm:ss.SSS}} %-5level [%X{{destination}}] [%thread] %logger{{36}} - %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="FILE"/>
  </root>
</configuration>
"""
