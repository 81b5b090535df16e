"""A Canal HA cluster as ZooKeeper shows it: which server runs a destination, and this client's registration.

Canal's servers share ``canal.zkServers``. For each destination one server
holds the ephemeral node ``/otter/canal/destinations/{destination}/running``
(``{"active": true, "address": "host:port", ...}``) and runs the destination;
the others wait, standby, and the first to create the node after it goes
(its server stopped, or its session expired) takes the destination over,
from the cursor the servers keep in ZooKeeper. Canal's Java client registers
itself as ``/otter/canal/destinations/{destination}/{clientId}/running``
(ephemeral, ``{"active": true, "address": ..., "clientId": ...}``), which is
how canal-admin shows who reads a destination, and one client at a time
holds it. :class:`CanalCluster` does both, with kazoo.

What ZooKeeper holds is checked before use: a running node whose address
is not ``host:port`` is refused, never connected to.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from dataclasses import dataclass
from typing import Any

import structlog
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from canalbridge.canal.errors import CanalConnectionError

log = structlog.get_logger("canalbridge.canal_cluster")

ROOT = "/otter/canal/destinations"
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


@dataclass(frozen=True)
class ServerAddress:
    """A Canal server's address, as its running node names it."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> ServerAddress:
        """``host:port`` (ValueError for anything else: the text came from ZooKeeper)."""
        host, colon, port = text.rpartition(":")
        if not colon or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"not host:port: {text[:80]!r}")
        return cls(host.strip("[]"), int(port))


class CanalClusterError(CanalConnectionError):
    """ZooKeeper did not answer, names no running server, or another client holds this one's registration: a
    connection error, tried again as a lost server is."""


class CanalCluster:
    """One destination of a Canal HA cluster, read through ZooKeeper ``zk_servers`` (``host:port,...``) by client
    ``client_id``. :meth:`running_server` connects and registers the client; the Receiver's thread calls it and
    :meth:`moved`; kazoo's own thread only records what changed."""

    def __init__(self, zk_servers: str, destination: str, client_id: str, *, timeout_s: float = 10.0) -> None:
        self.zk_servers = zk_servers
        self.destination = destination
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.address = f"zookeeper {zk_servers}"
        self._zk: KazooClient | None = None
        self._lock = threading.Lock()
        self._running: ServerAddress | None = None  # as the last change of the running node left it
        self._registered = False  # this session holds the client's node (a lost session took it)
        self._closed = False  # for good: the link that owns it closed
        self._log = log.bind(zookeeper=zk_servers, destination=destination)

    @property
    def running_path(self) -> str:
        return f"{ROOT}/{self.destination}/running"

    @property
    def client_path(self) -> str:
        return f"{ROOT}/{self.destination}/{self.client_id}/running"

    def running_server(self) -> ServerAddress:
        """The server that runs the destination now, with this client registered; :class:`CanalClusterError`
        when there is none, or ZooKeeper cannot say."""
        zk = self._session()
        try:
            self._register(zk)
            data, _ = zk.get(self.running_path)
        except NoNodeError:
            raise self._error("no Canal server runs the destination (no running node)") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise self._error(f"ZooKeeper did not answer: {type(exc).__name__} {exc}") from exc
        server = self._parse(data)
        if server is None:
            raise self._error("its running node names no active server")
        return server  # (what moved() compares with is the watch's alone: it may have seen a newer node already)

    def moved(self, connected: ServerAddress) -> ServerAddress | None:
        """Another server than ``connected`` runs the destination now (the new one), else None. Registers the
        client again if a lost session took its node; :class:`CanalClusterError` if another client holds it
        by then (the link reconnects, and waits its turn)."""
        with self._lock:
            running, registered = self._running, self._registered
        zk = self._zk
        if not registered and zk is not None and zk.state == KazooState.CONNECTED:
            try:
                self._register(zk)
            except (KazooException, KazooTimeoutError) as exc:  # (ZooKeeper flaps: tried at the next get)
                self._log.debug("canal_cluster.register_failed", error=str(exc))
        return running if running is not None and running != connected else None

    def close(self) -> None:
        """Drop the session (and with it the client's node), for good."""
        with self._lock:
            self._closed = True
            zk, self._zk = self._zk, None
        if zk is not None:
            try:
                zk.stop()
                zk.close()
            except KazooException as exc:
                self._log.warning("canal_cluster.close_failed", error=str(exc))

    # -- internals ------------------------------------------------------------------

    def _session(self) -> KazooClient:
        if self._zk is not None:
            return self._zk
        with self._lock:
            if self._closed:  # (a reconnect racing the job's stop opens no session that nobody closes)
                raise self._error("closed")
        zk = KazooClient(hosts=self.zk_servers, timeout=self.timeout_s)
        try:
            zk.start(timeout=self.timeout_s)
        except (KazooTimeoutError, KazooException) as exc:
            zk.close()
            raise self._error(f"ZooKeeper did not answer within {self.timeout_s:g} s") from exc
        try:
            zk.add_listener(self._state)
            zk.DataWatch(self.running_path, self._running_changed)
        except (KazooException, KazooTimeoutError) as exc:
            zk.stop()
            zk.close()
            raise self._error(f"ZooKeeper did not answer: {type(exc).__name__} {exc}") from exc
        with self._lock:
            closed = self._closed
            if not closed:
                self._zk = zk
        if closed:
            zk.stop()
            zk.close()
            raise self._error("closed")
        return zk

    def _register(self, zk: KazooClient) -> None:
        """Hold the client's running node, as Canal's Java client does; another session's is refused."""
        with self._lock:
            if self._registered:
                return
        data = json.dumps({"active": True, "address": _local_address(), "clientId": int(self.client_id)})
        try:
            zk.create(self.client_path, data.encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            held, stat = zk.get(self.client_path)
            if stat.ephemeralOwner != zk.client_id[0]:
                holder = _field(held, "address")
                raise self._error(f"client {self.client_id} is registered by another session (from {holder}): one "
                                  f"client at a time reads a destination as one client id") from None
        with self._lock:
            self._registered = True
        self._log.info("canal_cluster.registered", client_id=self.client_id)

    def _state(self, state: str) -> None:  # (kazoo's thread: record only)
        if state == KazooState.LOST:
            with self._lock:
                self._registered = False

    def _running_changed(self, data: bytes | None, stat: Any) -> None:  # (kazoo's thread: record only)
        try:
            server = None if data is None else self._parse(data)
        except CanalClusterError as exc:  # (the next connect reads it again, and says so)
            self._log.warning("canal_cluster.running_node_refused", error=str(exc))
            server = None
        with self._lock:
            self._running = server

    def _parse(self, data: bytes) -> ServerAddress | None:
        """The active server a running node names, None if it names none; a node that is not what Canal writes
        is an error."""
        try:
            node = json.loads(data.decode("utf-8"))
            if not isinstance(node, dict) or not isinstance(node.get("address"), str):
                raise ValueError("no address")
            if node.get("active") is False:
                return None
            return ServerAddress.parse(node["address"])
        except (UnicodeDecodeError, ValueError) as exc:
            raise self._error(f"its running node is not Canal's ({exc})") from None

    def _error(self, message: str) -> CanalClusterError:
        return CanalClusterError(message, address=self.address, destination=self.destination)


def _field(data: bytes, name: str) -> str:
    """A field of a node's JSON, shown in an error (bounded: it came from ZooKeeper)."""
    try:
        value = json.loads(data.decode("utf-8")).get(name)
    except (UnicodeDecodeError, ValueError, AttributeError):
        return "?"
    return str(value)[:80]


def _local_address() -> str:
    """This host's address, as Canal's Java client registers it (its IP)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
