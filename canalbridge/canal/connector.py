"""A Canal client connector: handshake, auth, subscribe, get/ack/rollback.

It speaks Canal's TCP protocol (the behaviour of Canal's own
``SimpleCanalConnector``) on the generated modules in ``canalbridge.protocol``.
It never retries: the Receiver owns reconnects and back-off. Every read has a
socket timeout, so a server that goes silent surfaces as an error, not a hang.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

from google.protobuf.message import DecodeError

from canalbridge.canal.batch import EMPTY_BATCH_ID, CanalBatch, parse_messages
from canalbridge.canal.errors import (
    CanalAuthError,
    CanalConnectionError,
    CanalProtocolError,
    CanalServerError,
)
from canalbridge.canal.framing import FrameError, encode_packet, read_packet
from canalbridge.canal.scramble import client_token
from canalbridge.protocol import CanalProtocol_pb2 as packet_pb

PacketType = packet_pb.PacketType
UNIT_MILLISECONDS = 2  # java.util.concurrent.TimeUnit.MILLISECONDS.ordinal()
NO_WAIT = -1  # Get.timeout -1: return at once with whatever the store holds


class CanalConnector:
    """One connection to one destination of a Canal server.

    Safe to share between threads: request/reply exchanges (connect,
    subscribe, get) hold ``_request_lock`` so replies pair with requests,
    while ack and rollback, which have no reply, only take ``_write_lock``.
    Canal handles a connection's packets in order, so an ack sent while a
    get waits takes effect when that get returns. (The sync core sends all
    of them from one thread: see ``canalbridge.sync.source.canal.link``.)
    """

    def __init__(
        self,
        host: str,
        port: int,
        destination: str,
        *,
        username: str = "",
        password: str = "",
        client_id: str = "1001",
        connect_timeout_s: float = 10.0,
        so_timeout_s: float = 60.0,
        idle_timeout_ms: int = 60 * 60 * 1000,
    ) -> None:
        self.host = host
        self.port = port
        self.destination = destination
        self.username = username
        self._password = password
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.so_timeout_s = so_timeout_s
        self.idle_timeout_ms = idle_timeout_ms
        self._sock: socket.socket | None = None
        self._request_lock = threading.Lock()
        self._write_lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the password
        return (
            f"CanalConnector({self.address}, destination={self.destination!r}, "
            f"username={self.username!r}, client_id={self.client_id!r})"
        )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    # -- connection -------------------------------------------------------

    def connect(self) -> None:
        """Open the socket, read the handshake and authenticate."""
        with self._request_lock:
            if self._sock is not None:
                return
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
            except OSError as exc:
                raise CanalConnectionError(
                    f"cannot connect: {exc}", address=self.address, destination=self.destination
                ) from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.so_timeout_s)
            self._sock = sock
            try:
                self._handshake_and_auth()
            except BaseException:
                self._close()
                raise

    def _handshake_and_auth(self) -> None:
        packet = self._read_locked("handshake")
        if packet.type != PacketType.HANDSHAKE:
            raise self._unexpected(packet, "HANDSHAKE")
        if packet.WhichOneof("version_present") and packet.version != 1:
            raise CanalProtocolError(
                f"unsupported protocol version {packet.version} (expected 1)", address=self.address
            )
        handshake = packet_pb.Handshake()
        self._parse(handshake, packet.body, "handshake")
        auth = packet_pb.ClientAuth(
            username=self.username,
            password=client_token(self._password, handshake.seeds),
            net_read_timeout=self.idle_timeout_ms,
            net_write_timeout=self.idle_timeout_ms,
        )
        self._send_locked(PacketType.CLIENTAUTHENTICATION, auth.SerializeToString(), "authentication")
        reply = self._read_locked("authentication")
        if reply.type != PacketType.ACK:
            raise self._unexpected(reply, "ACK")
        ack = packet_pb.Ack()
        self._parse(ack, reply.body, "authentication")
        if ack.error_code > 0:
            raise CanalAuthError(ack.error_message, address=self.address, username=self.username)

    def disconnect(self) -> None:
        """Close the socket now, waking a get that waits on it.

        Outstanding batches stay on the server until rolled back.
        """
        self._close()

    def __enter__(self) -> CanalConnector:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.disconnect()

    # -- requests ---------------------------------------------------------

    def subscribe(self, filter: str = "") -> None:
        """Subscribe this client id to the destination with a Canal table filter."""
        sub = packet_pb.Sub(destination=self.destination, client_id=self.client_id, filter=filter)
        self._request_ack(PacketType.SUBSCRIPTION, sub.SerializeToString(), "subscribe")

    def unsubscribe(self) -> None:
        """Drop this client id's subscription."""
        unsub = packet_pb.Unsub(destination=self.destination, client_id=self.client_id)
        self._request_ack(PacketType.UNSUBSCRIPTION, unsub.SerializeToString(), "unsubscribe")

    def get_without_ack(self, batch_size: int, timeout_ms: int | None = None) -> CanalBatch:
        """Fetch up to ``batch_size`` entries without acking them.

        ``timeout_ms`` None or 0 asks the server not to wait; a positive value
        lets it wait up to that long for a full batch, then return what it
        has. An empty result has batch id -1. (Canal's server reads a timeout
        of 0 as "block until the batch is full", which no caller here wants,
        so 0 is sent as -1.)
        """
        request = packet_pb.Get(
            destination=self.destination,
            client_id=self.client_id,
            fetch_size=batch_size if batch_size > 0 else 1000,
            timeout=NO_WAIT if timeout_ms is None or timeout_ms <= 0 else timeout_ms,
            unit=UNIT_MILLISECONDS,
            auto_ack=False,
        )
        read_timeout = self.so_timeout_s + max(timeout_ms or 0, 0) / 1000.0
        with self._request_lock:
            self._send_locked(PacketType.GET, request.SerializeToString(), "get")
            reply = self._read_locked("get", timeout_s=read_timeout)
            if reply.type == PacketType.ACK:
                # An error Ack here may answer an earlier ack/rollback, with the
                # reply to this GET still on its way: the stream can no longer
                # be trusted, so drop the connection as well as failing.
                ack = packet_pb.Ack()
                self._parse(ack, reply.body, "get")
                self._close()
                raise CanalServerError(
                    ack.error_code,
                    ack.error_message,
                    request="get",
                    address=self.address,
                    destination=self.destination,
                )
            if reply.type != PacketType.MESSAGES:
                raise self._unexpected(reply, "MESSAGES")
            try:
                return parse_messages(reply.body)
            except DecodeError as exc:
                raise self._undecodable("get", "Messages", exc) from exc

    def ack(self, batch_id: int) -> None:
        """Ack ``batch_id`` (must be the oldest outstanding). The server sends no reply."""
        if batch_id == EMPTY_BATCH_ID:
            return
        message = packet_pb.ClientAck(
            destination=self.destination, client_id=self.client_id, batch_id=batch_id
        )
        self._send_locked(PacketType.CLIENTACK, message.SerializeToString(), "ack")

    def rollback(self, batch_id: int = 0) -> None:
        """Roll back ``batch_id``, or every outstanding batch when 0. No reply."""
        message = packet_pb.ClientRollback(
            destination=self.destination, client_id=self.client_id, batch_id=batch_id
        )
        self._send_locked(PacketType.CLIENTROLLBACK, message.SerializeToString(), "rollback")

    # -- plumbing ----------------------------------------------------------

    def _request_ack(self, packet_type: packet_pb.PacketType, body: bytes, request: str) -> None:
        with self._request_lock:
            self._send_locked(packet_type, body, request)
            reply = self._read_locked(request)
            if reply.type != PacketType.ACK:
                raise self._unexpected(reply, "ACK")
            ack = packet_pb.Ack()
            self._parse(ack, reply.body, request)
        if ack.error_code > 0:
            raise CanalServerError(
                ack.error_code,
                ack.error_message,
                request=request,
                address=self.address,
                destination=self.destination,
            )

    def _require_socket(self, request: str) -> socket.socket:
        if self._sock is None:
            raise CanalConnectionError(
                f"{request}: not connected", address=self.address, destination=self.destination
            )
        return self._sock

    def _send_locked(self, packet_type: packet_pb.PacketType, body: bytes, request: str) -> None:
        frame = encode_packet(packet_type, body)
        try:
            with self._write_lock:
                self._require_socket(request).sendall(frame)
        except OSError as exc:
            self._close()
            raise CanalConnectionError(
                f"{request}: connection lost while sending: {exc}",
                address=self.address,
                destination=self.destination,
            ) from exc

    def _read_locked(self, request: str, timeout_s: float | None = None) -> packet_pb.Packet:
        sock = self._require_socket(request)
        try:
            sock.settimeout(timeout_s if timeout_s is not None else self.so_timeout_s)
            return read_packet(sock)
        except TimeoutError as exc:
            self._close()
            raise CanalConnectionError(
                f"{request}: no reply within {sock.gettimeout()} s",
                address=self.address,
                destination=self.destination,
            ) from exc
        except (OSError, FrameError) as exc:
            self._close()
            raise CanalConnectionError(
                f"{request}: connection lost: {exc}", address=self.address, destination=self.destination
            ) from exc

    def _parse(self, message: object, body: bytes, what: str) -> None:
        try:
            message.ParseFromString(body)  # type: ignore[attr-defined]
        except DecodeError as exc:
            raise self._undecodable(what, type(message).__name__, exc) from exc

    def _undecodable(self, what: str, message_type: str, exc: DecodeError) -> CanalProtocolError:
        return CanalProtocolError(
            f"{what}: cannot decode {message_type}: {exc}", address=self.address, destination=self.destination
        )

    def _unexpected(self, packet: packet_pb.Packet, expected: str) -> CanalProtocolError:
        name = PacketType.Name(packet.type) if packet.type in PacketType.values() else str(packet.type)
        self._close()
        return CanalProtocolError(
            f"expected a {expected} packet, got {name}", address=self.address, destination=self.destination
        )

    def _close(self) -> None:
        # No lock needed: swapping the attribute is atomic, and a thread still
        # reading the old socket gets an error from the shutdown and reports it.
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
