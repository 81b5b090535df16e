"""The control endpoint: a small JSON HTTP API, by default on a Unix socket in ``state_dir``.

``GET /status`` returns the status document. An action is a ``POST`` to
``/jobs/<name>/<action>`` with a JSON object as its body and
``Content-Type: application/json`` (which a browser cannot send to another
origin without a preflight this endpoint never grants). The actions and the
parameters each takes are the daemon's table
(:data:`canalbridge.daemon.service.ACTIONS`); this endpoint serves the names
it is given. Who may call
it, and how each request is checked first: :mod:`canalbridge.daemon.control_access`.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import socketserver
import stat
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from canalbridge.daemon.control_access import (
    ControlEndpoint,
    ControlError,
    ControlUnreachable,
    check_socket_path,
    peer_refusal,
    request_refusal,
)

__all__ = ["Action", "ControlError", "ControlServer", "ControlUnreachable", "connection", "request"]

MAX_BODY = 1 << 20  # an action's parameters: a few names and a condition
READ_TIMEOUT_SECONDS = 30  # for a request to arrive whole (not for the action, which may take longer)

# (job, action, the body's parameters: a reset's channels, a snapshot's tables and filter, a verify's tables)
# -> the job's status
Action = Callable[[str, str, Mapping[str, Sequence[str]]], dict[str, Any]]


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):  # type: ignore[no-untyped-def]
        request, _ = super().get_request()
        return request, ("unix", 0)  # BaseHTTPRequestHandler wants a (host, port)


class _Refused(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


class _HTTP6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class ControlServer:
    """Serves ``status()`` and ``act(job, action, parameters)`` at ``endpoint`` until :meth:`stop`."""

    def __init__(self, endpoint: ControlEndpoint, status: Callable[[], dict[str, Any]], act: Action,
                 actions: Collection[str]) -> None:
        """``actions``: the names ``act`` takes (the daemon's action table); any other path is not found."""
        self.endpoint = endpoint
        self._socket_file: tuple[int, int] | None = None  # (device, inode) of the socket this server made
        handler = _handler(endpoint, status, act, frozenset(actions))
        try:
            if endpoint.unix:
                self._server: socketserver.BaseServer = self._bind_unix(handler)
            else:
                server_class = _HTTP6Server if ":" in endpoint.host_port[0] else ThreadingHTTPServer
                self._server = server_class(endpoint.host_port, handler)
                self._server.daemon_threads = True
        except OSError as exc:
            # (the OSError's own text may name the socket's path: only its reason goes on)
            raise ControlError(f"{endpoint.describe()} cannot listen: {exc.strerror or exc}") from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="control", daemon=True)

    def _bind_unix(self, handler: type[BaseHTTPRequestHandler]) -> socketserver.BaseServer:
        path = self.endpoint.path
        check_socket_path(self.endpoint)
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISSOCK(found.st_mode):
                raise ControlError(f"{self.endpoint.describe()}: something other than a socket is at its path; "
                                   f"nothing was removed")
            if _listening(path):
                raise ControlError(f"{self.endpoint.describe()}: another process listens there")
            os.unlink(path)  # left by a daemon that died
        server = _UnixHTTPServer(path, handler)
        try:
            os.chmod(path, 0o600)  # (peer_refusal covers the moment before)
            made = os.stat(path)
        except OSError:
            server.server_close()
            os.unlink(path)
            raise
        self._socket_file = (made.st_dev, made.st_ino)
        return server

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)  # shutdown() already waited for the serving loop to end
        if self._socket_file is not None:
            try:
                found = os.lstat(self.endpoint.path)
                if (found.st_dev, found.st_ino) == self._socket_file:  # not one another daemon made since
                    os.unlink(self.endpoint.path)
            except FileNotFoundError:
                pass


def _listening(path: str) -> bool:
    """Whether a process accepts connections on the Unix socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(5)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        return False
    except OSError:
        return True  # (not refused: say so rather than take its place)
    finally:
        probe.close()
    return True


def _parameters(content_type: str | None, body: bytes) -> dict[str, list[str]]:
    """An action's parameters from its JSON body: names to a string or a list of strings."""
    if (content_type or "").split(";")[0].strip().lower() != "application/json":
        raise _Refused(415, "an action needs a JSON body sent with Content-Type: application/json")
    try:
        parsed = json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Refused(400, f"the body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise _Refused(400, "the body must be a JSON object of the action's parameters")
    parameters: dict[str, list[str]] = {}
    for name, value in parsed.items():
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(each, str) for each in values):
            raise _Refused(400, f"parameter {name!r} must be a string or a list of strings")
        parameters[name] = values
    return parameters


def _handler(endpoint: ControlEndpoint, status: Callable[[], dict[str, Any]],
             act: Action, actions: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = READ_TIMEOUT_SECONDS  # a peer that never finishes its request does not hold a thread for ever

        def log_message(self, format: str, *args: Any) -> None:  # keep the access log quiet
            pass

        def _reply(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def _admitted(self) -> bool:
            """Whether the peer and the request's headers may be served; if not, the refusal is sent."""
            reason = peer_refusal(self.connection) if endpoint.unix else None
            refusal = (403, reason) if reason else request_refusal(self.headers, endpoint)
            if refusal is None:
                return True
            self.close_connection = True  # (a body left unread must not be taken for the next request)
            self._reply(refusal[0], {"error": refusal[1]})
            return False

        def do_GET(self) -> None:
            if not self._admitted():
                return
            if self.path == "/status":
                self._reply(200, status())
            elif self._action(self.path) is not None:
                self._reply(405, {"error": "an action needs a POST with a JSON body"})
            else:
                self._reply(404, {"error": f"no such resource {self.path}"})

        def do_POST(self) -> None:
            if not self._admitted():
                return
            url = urlsplit(self.path)
            target = self._action(url.path)
            try:
                if target is None:
                    raise _Refused(404, f"no such action {url.path}")
                if url.query:
                    raise _Refused(400, "an action's parameters go in its JSON body, not the URL")
                parameters = _parameters(self.headers.get("Content-Type"), self._body())
            except _Refused as refused:
                self.close_connection = True
                self._reply(refused.code, {"error": str(refused)})
                return
            job, action = target
            try:
                self._reply(200, act(job, action, parameters))
            except KeyError as exc:
                self._reply(404, {"error": str(exc.args[0]) if exc.args else str(exc)})
            except Exception as exc:  # a refused transition, reported to the caller
                self._reply(409, {"error": str(exc)})

        def _body(self) -> bytes:
            length = (self.headers.get("Content-Length") or "").strip()
            if not (length.isascii() and length.isdigit()):
                raise _Refused(411, "an action's body needs a Content-Length")
            if int(length) > MAX_BODY:
                raise _Refused(413, f"an action's body is at most {MAX_BODY} bytes")
            return self.rfile.read(int(length))

        @staticmethod
        def _action(path: str) -> tuple[str, str] | None:
            parts = urlsplit(path).path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "jobs" or parts[2] not in actions:
                return None
            return unquote(parts[1]), parts[2]

    return Handler


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def connection(endpoint: ControlEndpoint, timeout: float) -> http.client.HTTPConnection:
    """An HTTP connection to the endpoint (not yet open)."""
    if endpoint.unix:
        check_socket_path(endpoint)
        return _UnixConnection(endpoint.path, timeout)
    host, port = endpoint.host_port
    return http.client.HTTPConnection(host, port, timeout=timeout)


def request(endpoint: ControlEndpoint, method: str, path: str, body: Mapping[str, Any] | None = None,
            timeout: float = 120.0) -> dict[str, Any]:
    """Call the control endpoint (a ``POST`` sends ``body``, ``{}`` by default, as JSON); raise
    :class:`ControlError` when it is down or says no."""
    http_connection = connection(endpoint, timeout)
    headers = {"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {}
    data = None
    if method == "POST":
        data = json.dumps(body or {}).encode()
        headers["Content-Type"] = "application/json"
    where = endpoint.describe()
    # Each error is raised "from None" with the OSError's reason only: its own text may name the socket's path.
    try:
        http_connection.request(method, path, body=data, headers=headers)
        response = http_connection.getresponse()
        answer = json.loads(response.read() or b"{}")
    except (ConnectionRefusedError, FileNotFoundError) as exc:
        raise ControlUnreachable(f"{where} is not reachable: {exc.strerror}") from None
    except PermissionError as exc:
        raise ControlError(f"{where}: {exc.strerror}: only the daemon's user may use it") from None
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as exc:
        # Something listens but gave no answer (a timeout, a dropped connection): not proof that it is down.
        raise ControlError(f"{where} did not answer: {exc}") from None
    except ValueError:  # http.client refusing a header: only the token could make one it refuses
        raise ControlError(f"{where}: the control token cannot be sent in a header; check "
                           f"[daemon] control_token_env") from None
    finally:
        http_connection.close()
    if response.status != 200:
        raise ControlError(f"{where}: {answer.get('error', response.reason)}")
    return answer
