"""Who may act through the control endpoint: where it listens, the token it asks for, and the checks every
request passes before it is served.

By default the endpoint is a Unix socket in ``state_dir``, mode 0600, and
the daemon also checks that the peer runs as its own user (or root): only
that user can act on a job. A TCP endpoint is reachable by every local user
and container on the network, so it always asks for a token: the one
``[daemon] control_token_env`` names, or else one the daemon generates at
its first start into a 0600 file in ``state_dir``, where the CLI reads it.
Whatever the transport, a request must name a loopback host (or the
configured one) in ``Host``, so that a web page cannot reach the endpoint
through DNS rebinding, and must carry no ``Origin``, which browsers add to
every cross-origin request. The token and the socket's path stay out of
every message.
"""

from __future__ import annotations

import hmac
import os
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from typing import TYPE_CHECKING

from canalbridge.daemon.control_token import WHERE as TOKEN_WHERE
from canalbridge.daemon.control_token import TokenFileError, client_token, daemon_token

if TYPE_CHECKING:
    from canalbridge.daemon.config import DaemonSettings

SOCKET_NAME = "control.sock"
UNIX_PATH_MAX = 107  # a sockaddr_un's path holds 108 bytes with the closing NUL
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
TOKEN_HINT = (f"the CLI sends the token of [daemon] control_token_env, or else the one the daemon wrote to "
              f"{TOKEN_WHERE}, which only the daemon's user can read")


class ControlError(Exception):
    """The control endpoint refused a request, cannot be reached, or cannot be set up."""


class ControlUnreachable(ControlError):
    """Nothing listens at the control endpoint (connection refused, no socket): the daemon is not running."""


def address_problem(address: str) -> str | None:
    """What is wrong with ``[daemon] control`` (None: nothing): an absolute Unix socket path (optionally
    ``unix:``), or ``host:port`` (``[::1]:port`` for IPv6)."""
    if _unix(address):
        return None if _path(address).startswith("/") else f"a Unix socket path must be absolute, got {address!r}"
    host, _, port = address.rpartition(":")
    if host and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535:
        return None
    return f"must be an absolute Unix socket path or host:port, got {address!r}"


def _unix(address: str) -> bool:
    return address.startswith("/") or address.startswith("unix:")


def _path(address: str) -> str:
    return address[len("unix:"):] if address.startswith("unix:") else address


@dataclass(frozen=True)
class ControlEndpoint:
    """Where the control endpoint listens, and the token its requests carry (None: it asks for none)."""

    address: str  # a Unix socket's path, or host:port (checked by address_problem)
    token: str | None = field(default=None, repr=False)
    configured: bool = True  # whether [daemon] control names the address, rather than the default socket

    @property
    def unix(self) -> bool:
        return _unix(self.address)

    @property
    def path(self) -> str:
        """The Unix socket's path."""
        return _path(self.address)

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host.strip("[]"), int(port)

    def describe(self) -> str:
        """The endpoint as messages name it: a socket by the setting that places it, never by its path."""
        if not self.unix:
            return f"control endpoint {self.address}"
        return ("the control socket ([daemon] control)" if self.configured
                else f"the control socket ({SOCKET_NAME} in [daemon] state_dir)")


def daemon_endpoint(settings: DaemonSettings) -> ControlEndpoint:
    """The endpoint the daemon serves. A TCP one always asks for a token: without ``control_token_env``, the
    one in ``state_dir``, written there (mode 0600) at the first start."""
    endpoint = _endpoint(settings)
    if endpoint.unix:
        check_socket_path(endpoint)
    return _with_file_token(endpoint, lambda: daemon_token(settings.state_dir))


def client_endpoint(settings: DaemonSettings) -> ControlEndpoint:
    """The endpoint the CLI calls, with the token the daemon asks for (none if it never wrote one yet)."""
    return _with_file_token(_endpoint(settings), lambda: client_token(settings.state_dir))


def _endpoint(settings: DaemonSettings) -> ControlEndpoint:
    if settings.control is not None:
        return ControlEndpoint(settings.control, settings.control_token)
    return ControlEndpoint(str(settings.state_dir / SOCKET_NAME), settings.control_token, configured=False)


def _with_file_token(endpoint: ControlEndpoint, token: Callable[[], str | None]) -> ControlEndpoint:
    """A TCP ``endpoint`` with no configured token, given the one of the token file (``token``: its read)."""
    if endpoint.unix or endpoint.token is not None:
        return endpoint
    try:
        return ControlEndpoint(endpoint.address, token(), endpoint.configured)
    except TokenFileError as exc:
        raise ControlError(str(exc)) from None


def check_socket_path(endpoint: ControlEndpoint) -> None:
    """Raise :class:`ControlError` if the socket's path is too long for a Unix socket address."""
    length = len(os.fsencode(endpoint.path))
    if length > UNIX_PATH_MAX:
        setting = "[daemon] control" if endpoint.configured else "[daemon] state_dir (or set [daemon] control)"
        raise ControlError(f"{endpoint.describe()}: its path is {length} bytes, over the {UNIX_PATH_MAX} a Unix "
                           f"socket's address holds; shorten {setting}")


def peer_refusal(connection: socket.socket) -> str | None:
    """Why the process at the other end of a Unix socket may not use it (None: it runs as the daemon's
    user, or as root). The socket's mode already keeps others out; this also covers the moment between its
    creation and its chmod."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    if uid in (os.getuid(), 0):
        return None
    return "only the daemon's own user may use the control socket"


def request_refusal(headers: Message, endpoint: ControlEndpoint) -> tuple[int, str] | None:
    """The HTTP status and reason to refuse a request with, judged by its headers; None to serve it."""
    if headers.get("Origin") is not None:
        return 403, "requests from web pages (with an Origin header) are refused"
    host = host_name(headers.get("Host"))
    allowed = LOOPBACK_HOSTS if endpoint.unix else LOOPBACK_HOSTS | {endpoint.host_port[0].lower()}
    if host not in allowed:
        return 403, "the Host header must name this machine's loopback address or the configured [daemon] control"
    if endpoint.token is None:
        return None
    offered = headers.get("Authorization") or ""
    if hmac.compare_digest(offered.encode(), f"Bearer {endpoint.token}".encode()):
        return None
    return 401, f"a valid control token is required: {TOKEN_HINT}"


def host_name(header: str | None) -> str | None:
    """The host of a ``Host`` header, without its port (``[::1]:8765`` -> ``::1``), lower-cased."""
    if not header:
        return None
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header
