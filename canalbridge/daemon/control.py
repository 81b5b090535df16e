"""The control endpoint: a small JSON HTTP API on loopback (or a Unix socket).

``GET /status`` returns the status document; ``POST /jobs/<name>/pause``,
``/resume``, ``/stop`` and ``/reset`` act on a job (``/reset?channel=<target>``,
repeated, resets those channels only); ``/snapshot`` starts a snapshot of the
job's tables (``?table=<schema.table>``, repeated: those only;
``&where=<condition>``: the rows it takes), ``/cancel-snapshot`` cancels
it, ``/verify`` compares the targets with their source (``?table=``, as a
snapshot's) and ``/cancel-verify`` cancels that. When a token is configured every request must carry
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import http.client
import json
import os
import socket
import socketserver
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


class ControlError(Exception):
    """The control endpoint refused a request or cannot be reached."""


class ControlUnreachable(ControlError):
    """Nothing listens at the control endpoint (connection refused, no socket): the daemon is not running."""


# (job, action, the query's parameters: a reset's channels, a snapshot's tables and filter, a verify's tables)
# -> the job's status
Action = Callable[[str, str, Mapping[str, Sequence[str]]], dict[str, Any]]


ACTIONS = ("pause", "resume", "stop", "reset", "snapshot", "cancel-snapshot", "verify", "cancel-verify")


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):  # type: ignore[no-untyped-def]
        request, _ = super().get_request()
        return request, ("unix", 0)  # BaseHTTPRequestHandler wants a (host, port)


def _is_unix(address: str) -> bool:
    return address.startswith("/") or address.startswith("unix:")


def _unix_path(address: str) -> str:
    return address[len("unix:"):] if address.startswith("unix:") else address


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


class ControlServer:
    """Serves ``status()`` and ``act(job, action)`` until :meth:`stop`."""

    def __init__(self, address: str, token: str | None, status: Callable[[], dict[str, Any]], act: Action) -> None:
        self.address = address
        handler = _handler(token, status, act)
        if _is_unix(address):
            path = _unix_path(address)
            if os.path.exists(path):
                os.unlink(path)
            self._server: socketserver.BaseServer = _UnixHTTPServer(path, handler)
            os.chmod(path, 0o600)
        else:
            self._server = ThreadingHTTPServer(_host_port(address), handler)
            self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)  # shutdown() already waited for the serving loop to end
        if _is_unix(self.address):
            try:
                os.unlink(_unix_path(self.address))
            except FileNotFoundError:
                pass


def _handler(token: str | None, status: Callable[[], dict[str, Any]], act: Action) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep the access log quiet
            pass

        def _reply(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if token is None:
                return True
            offered = self.headers.get("Authorization", "")
            if hmac.compare_digest(offered.encode(), f"Bearer {token}".encode()):
                return True
            self._reply(401, {"error": "a valid control token is required"})
            return False

        def do_GET(self) -> None:
            if not self._authorized():
                return
            if self.path == "/status":
                self._reply(200, status())
            else:
                self._reply(404, {"error": f"no such resource {self.path}"})

        def do_POST(self) -> None:
            if not self._authorized():
                return
            url = urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "jobs" or parts[2] not in ACTIONS:
                self._reply(404, {"error": f"no such action {url.path}"})
                return
            params = parse_qs(url.query, keep_blank_values=True)
            try:
                self._reply(200, act(unquote(parts[1]), parts[2], params))
            except KeyError as exc:
                self._reply(404, {"error": str(exc.args[0]) if exc.args else str(exc)})
            except Exception as exc:  # a refused transition, reported to the caller
                self._reply(409, {"error": str(exc)})

    return Handler


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def request(address: str, method: str, path: str, token: str | None, timeout: float = 120.0) -> dict[str, Any]:
    """Call the control endpoint; raise ControlError when it is down or says no."""
    if _is_unix(address):
        connection: http.client.HTTPConnection = _UnixConnection(_unix_path(address), timeout)
    else:
        host, port = _host_port(address)
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        body = json.loads(response.read() or b"{}")
    except (ConnectionRefusedError, FileNotFoundError) as exc:
        raise ControlUnreachable(f"control endpoint {address} is not reachable: {exc}") from exc
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as exc:
        # Something listens but gave no answer (a timeout, a dropped connection): not proof that it is down.
        raise ControlError(f"control endpoint {address} did not answer: {exc}") from exc
    finally:
        connection.close()
    if response.status != 200:
        raise ControlError(f"control endpoint {address}: {body.get('error', response.reason)}")
    return body
