"""Typed errors of the Canal client. Each names the server it was talking to.

No error carries a password or its scramble: messages are built from the
address, destination and what the server said, never from credentials.
"""

from __future__ import annotations


class CanalError(Exception):
    """Base class: something went wrong talking to a Canal server."""

    def __init__(self, message: str, *, address: str, destination: str | None = None) -> None:
        self.address = address
        self.destination = destination
        where = f"canal {address}" + (f" destination {destination!r}" if destination else "")
        super().__init__(f"{where}: {message}")


class CanalConnectionError(CanalError):
    """The connection was refused, timed out, or was lost mid-conversation."""


class CanalAuthError(CanalError):
    """The server rejected the username/password (Canal answers code 400)."""

    def __init__(self, server_message: str, *, address: str, username: str) -> None:
        self.server_message = server_message
        self.username = username
        super().__init__(
            f"authentication failed for user {username!r}: {server_message}", address=address
        )


class CanalServerError(CanalError):
    """The server answered a request with an error Ack (non-zero code)."""

    def __init__(
        self, code: int, server_message: str, *, request: str, address: str, destination: str | None
    ) -> None:
        self.code = code
        self.server_message = server_message
        self.request = request
        super().__init__(
            f"{request} failed with server error {code}: {server_message}",
            address=address,
            destination=destination,
        )


class CanalProtocolError(CanalError):
    """The server sent something the protocol does not allow at this point."""
