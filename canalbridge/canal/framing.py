"""Canal's framing: every packet is a 4-byte big-endian length, then a ``Packet``.

Shared by the client connector and the dev server so that both read and
write frames the same way.
"""

from __future__ import annotations

import socket
import struct

from google.protobuf.message import DecodeError

from canalbridge.protocol import CanalProtocol_pb2 as packet_pb

HEADER = struct.Struct(">i")
# Canal has no limit of its own; this one only stops a corrupt length prefix
# from making us allocate gigabytes.
MAX_FRAME_BYTES = 1 << 30
# Canal's server stamps every packet with version 1 (NettyUtils.VERSION).
PROTOCOL_VERSION = 1


class FrameError(Exception):
    """The peer closed the stream or sent a frame that cannot be a packet."""


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes or raise ``FrameError`` if the peer closes first."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = sock.recv_into(view[received:], size - received)
        if count == 0:
            raise FrameError(f"peer closed the connection after {received} of {size} bytes")
        received += count
    return bytes(buffer)


def read_frame(sock: socket.socket) -> bytes:
    """Read one length-prefixed frame and return its payload."""
    (length,) = HEADER.unpack(recv_exactly(sock, HEADER.size))
    if length < 0 or length > MAX_FRAME_BYTES:
        raise FrameError(f"frame length {length} is outside 0..{MAX_FRAME_BYTES}")
    return recv_exactly(sock, length)


def read_packet(sock: socket.socket) -> packet_pb.Packet:
    """Read one frame and parse it as a ``Packet``."""
    payload = read_frame(sock)
    packet = packet_pb.Packet()
    try:
        packet.ParseFromString(payload)
    except DecodeError as exc:
        raise FrameError(f"frame of {len(payload)} bytes is not a Canal Packet: {exc}") from exc
    return packet


def encode_packet(
    packet_type: packet_pb.PacketType, body: bytes, *, with_version: bool = False
) -> bytes:
    """Serialize a ``Packet`` of ``packet_type`` around ``body``, with its length prefix."""
    packet = packet_pb.Packet(type=packet_type, body=body)
    if with_version:
        packet.version = PROTOCOL_VERSION
    payload = packet.SerializeToString()
    return HEADER.pack(len(payload)) + payload
