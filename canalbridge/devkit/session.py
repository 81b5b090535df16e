"""One client connection to the dev server, answering as Canal's netty handlers do.

The stages and replies follow Canal's ``HandshakeInitializationHandler``,
``ClientAuthenticationHandler`` and ``SessionHandler``: the server speaks
first with a seed; any packet before a successful auth is read as
``ClientAuth``; SUBSCRIPTION/UNSUBSCRIPTION get an ``Ack``; GET gets
``Messages`` (batch id -1 when empty); CLIENTACK and CLIENTROLLBACK get no
reply unless they fail, and failures of any request are sent as an error
``Ack`` (400, or 401/402 for Canal's own argument checks).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping

import structlog
from google.protobuf.message import DecodeError

from canalbridge.canal.framing import FrameError, encode_packet, read_packet
from canalbridge.devkit.destination import Destination
from canalbridge.devkit.meta import BatchRange, ClientMeta, MetaError
from canalbridge.devkit.store import NoMatchAck, StoreClosed
from canalbridge.protocol import CanalProtocol_pb2 as packet_pb

PacketType = packet_pb.PacketType
log = structlog.get_logger("canalbridge.devkit")

# Canal closes a subscriber idle for an hour unless ClientAuth asks otherwise.
DEFAULT_IDLE_TIMEOUT_MS = 60 * 60 * 1000
_TIME_UNIT_SECONDS = {0: 1e-9, 1: 1e-6, 2: 1e-3, 3: 1.0, 4: 60.0, 5: 3600.0, 6: 86400.0}


class RequestError(Exception):
    """A request the server answers with an error Ack."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Session:
    """Serves one accepted socket until the client leaves or the server stops."""

    def __init__(
        self,
        sock: socket.socket,
        destinations: Mapping[str, Destination],
        on_close: Callable[[Session], None],
    ) -> None:
        self.sock = sock
        self.destinations = destinations
        self._on_close = on_close
        self._authorized: frozenset[str] = frozenset()
        host, port = sock.getpeername()[:2]
        self.peer = f"{host}:{port}"

    def close(self) -> None:
        """Drop the connection (used to stop the server or to simulate a network cut)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def serve(self) -> None:
        try:
            seed = os.urandom(8)
            self._send(PacketType.HANDSHAKE, packet_pb.Handshake(seeds=seed).SerializeToString())
            idle_timeout_ms = self._authenticate(seed)
            self.sock.settimeout(idle_timeout_ms / 1000.0)
            while True:
                packet = read_packet(self.sock)
                try:
                    self._dispatch(packet)
                except DecodeError as exc:
                    self._send_ack(400, f"cannot decode the body of packet type {packet.type}: {exc}")
                except RequestError as exc:
                    self._send_ack(exc.code, exc.message)
        except TimeoutError:
            log.info("devserver.idle_timeout", peer=self.peer)
        except (FrameError, OSError, StoreClosed):
            pass  # the client left or the server is stopping
        finally:
            try:
                self.sock.close()
            finally:
                self._on_close(self)

    # -- stages ---------------------------------------------------------------

    def _authenticate(self, seed: bytes) -> int:
        """Loop until a ClientAuth passes; return the idle timeout it asked for."""
        while True:
            packet = read_packet(self.sock)
            auth = packet_pb.ClientAuth()
            try:
                auth.ParseFromString(packet.body)
            except DecodeError:
                self._send_ack(400, "auth failed: the packet body is not a ClientAuth")
                continue
            candidates = (
                [self.destinations[auth.destination]]
                if auth.destination in self.destinations
                else [] if auth.destination else list(self.destinations.values())
            )
            accepted = frozenset(
                d.name for d in candidates if d.accepts(auth.username, auth.password, seed)
            )
            if not accepted:
                log.info("devserver.auth_failed", peer=self.peer, user=auth.username)
                self._send_ack(400, f"auth failed for user:{auth.username}")
                continue
            self._authorized = accepted
            if auth.destination and auth.client_id:
                self._subscribe(auth.destination, auth.client_id, auth.filter)
            self._send_ack(0, "")
            return auth.net_read_timeout if auth.net_read_timeout > 0 else DEFAULT_IDLE_TIMEOUT_MS

    def _dispatch(self, packet: packet_pb.Packet) -> None:
        kind = packet.type
        if kind == PacketType.SUBSCRIPTION:
            sub = packet_pb.Sub.FromString(packet.body)
            self._require_identity(sub.destination, sub.client_id, "Sub")
            self._subscribe(sub.destination, sub.client_id, sub.filter)
            self._send_ack(0, "")
        elif kind == PacketType.UNSUBSCRIPTION:
            unsub = packet_pb.Unsub.FromString(packet.body)
            self._require_identity(unsub.destination, unsub.client_id, "Unsub")
            self._client(unsub.destination, unsub.client_id).subscribed = False
            self._send_ack(0, "")
        elif kind == PacketType.GET:
            get = packet_pb.Get.FromString(packet.body)
            self._require_identity(get.destination, get.client_id, "Get")
            self._get(get)
        elif kind == PacketType.CLIENTACK:
            ack = packet_pb.ClientAck.FromString(packet.body)
            self._require_identity(ack.destination, ack.client_id, "Ack")
            self._ack(ack)
        elif kind == PacketType.CLIENTROLLBACK:
            rollback = packet_pb.ClientRollback.FromString(packet.body)
            self._require_identity(rollback.destination, rollback.client_id, "Rollback")
            self._rollback(rollback)
        else:
            name = PacketType.Name(kind) if kind in PacketType.values() else str(kind)
            raise RequestError(400, f"packet type: {name} is NOT supported!")

    # -- requests -----------------------------------------------------------------

    def _subscribe(self, destination: str, client_id: str, filter_text: str) -> None:
        target = self._destination(destination)
        _check_client_id(client_id)
        target.subscribe(client_id, filter_text)
        log.info("devserver.subscribed", destination=destination, client_id=client_id, filter=filter_text)

    def _get(self, get: packet_pb.Get) -> None:
        destination = self._destination(get.destination)
        meta = self._subscribed_client(get.destination, get.client_id)
        if get.timeout == -1:
            wait_s: float | None = 0.0  # Canal's tryGet
        elif get.timeout <= 0:
            wait_s = None  # Canal blocks until a full batch is there
        else:
            wait_s = get.timeout * _TIME_UNIT_SECONDS.get(get.unit, 1e-3)
        hold = destination.held_get
        held = hold is not None and hold.park(self)
        with destination.get_lock:
            result = destination.store.get(max(get.fetch_size, 1), wait_s)
            batch_id = (
                meta.add_batch(BatchRange(result.end_sequence))
                if result.events
                else -1
            )
        if held:
            assert hold is not None
            hold.served(batch_id)
            destination.held_get = None
        messages = packet_pb.Messages(batch_id=batch_id, messages=[e.raw for e in result.events])
        # Canal's raw-entry path writes MESSAGES without a version field.
        self.sock.sendall(encode_packet(PacketType.MESSAGES, messages.SerializeToString()))

    def _ack(self, ack: packet_pb.ClientAck) -> None:
        if ack.batch_id == 0:
            raise RequestError(402, f"batchId should assign value. Ack: batch_id {ack.batch_id}")
        if ack.batch_id == -1:
            return  # Canal ignores the ack of an empty get
        destination = self._destination(ack.destination)
        meta = self._subscribed_client(ack.destination, ack.client_id)
        batch = self._remove_batch(meta, ack.batch_id, "ack error ,")
        try:
            destination.store.ack(batch.end_sequence)  # the destination's ack listener moves the meta cursor
        except NoMatchAck as exc:
            # An ack is not serialised with a rollback: one on another connection of this client can roll the
            # store back between the two steps. Canal's store then finds no such position and the server
            # answers with an error.
            raise RequestError(400, f"something goes wrong with channel: no match ack position ({exc})") from exc

    def _rollback(self, rollback: packet_pb.ClientRollback) -> None:
        destination = self._destination(rollback.destination)
        meta = self._client(rollback.destination, rollback.client_id)
        if not meta.subscribed:
            return  # Canal ignores a rollback before subscription
        # Like Canal (both synchronise on the instance), a rollback waits for a
        # get that holds the lock. A get that has not reached the lock yet,
        # perhaps a dead connection's, can still run after the rollback and
        # strand entries as an outstanding batch: clients must detect that
        # (HeldGet reproduces it).
        with destination.get_lock:
            if rollback.batch_id == 0:
                meta.clear_batches()
            else:
                self._remove_batch(meta, rollback.batch_id, "rollback error,")
            # Canal rolls the whole store back even for a single batch id.
            destination.store.rollback()
        hold = destination.held_get
        if hold is not None:
            hold.after_rollback(self)

    # -- helpers --------------------------------------------------------------------

    def _remove_batch(self, meta: ClientMeta, batch_id: int, prefix: str) -> BatchRange:
        try:
            batch = meta.remove_batch(batch_id)
        except MetaError as exc:
            raise RequestError(400, str(exc)) from exc
        if batch is None:
            raise RequestError(
                400,
                f"{prefix} clientId:{meta.client_id} batchId:{batch_id} is not exist , please check",
            )
        return batch

    def _require_identity(self, destination: str, client_id: str, what: str) -> None:
        if not destination or not client_id:
            raise RequestError(401, f"destination or clientId is null. {what}: {destination!r}/{client_id!r}")

    def _destination(self, name: str) -> Destination:
        destination = self.destinations.get(name)
        if destination is None:
            raise RequestError(400, f"destination:{name} should start first")
        if name not in self._authorized:
            raise RequestError(400, f"auth failed for destination:{name}")
        return destination

    def _client(self, destination: str, client_id: str) -> ClientMeta:
        _check_client_id(client_id)
        return self._destination(destination).client(client_id)

    def _subscribed_client(self, destination: str, client_id: str) -> ClientMeta:
        meta = self._client(destination, client_id)
        if not meta.subscribed:
            raise RequestError(
                400, f"ClientIdentity:{destination}/{client_id} should subscribe first"
            )
        return meta

    def _send(self, packet_type: packet_pb.PacketType, body: bytes) -> None:
        self.sock.sendall(encode_packet(packet_type, body, with_version=True))

    def _send_ack(self, code: int, message: str) -> None:
        ack = packet_pb.Ack(error_message=message)
        if code:
            ack.error_code = code
        self._send(PacketType.ACK, ack.SerializeToString())


def _check_client_id(client_id: str) -> None:
    """Canal parses the client id as a Java short; anything else fails the request."""
    try:
        value = int(client_id)
    except ValueError:
        value = None
    if value is None or not -32768 <= value <= 32767:
        raise RequestError(400, f'NumberFormatException: For input string: "{client_id}"')
