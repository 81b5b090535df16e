"""Issue 38: who may act through the control endpoint, and what a request must look like to be served."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from canalbridge.daemon.config import DaemonSettings
from canalbridge.daemon.control import ControlError, ControlServer, ControlUnreachable, connection, request
from canalbridge.daemon.control_access import ControlEndpoint, client_endpoint, daemon_endpoint
from canalbridge.daemon.control_token import TOKEN_NAME
from tests.infra.processes import free_port

SYSTEM_PYTHON = "/usr/bin/python3"  # one another user can run (the venv's may live under /root)
# What a process of another user sees when it asks for the status on the socket.
AS_ANOTHER_USER = """
import http.client, socket, sys
try:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    sock.sendall(b"GET /status HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n")
    response = http.client.HTTPResponse(sock)
    response.begin()
    print(response.status, response.read().decode())
except OSError as exc:
    print(type(exc).__name__)
"""


class Jobs:
    """What the endpoint serves: a status, and the actions it was asked for."""

    actions = ("pause", "resume", "stop", "reset", "snapshot", "cancel-snapshot", "verify", "cancel-verify")

    def __init__(self) -> None:
        self.acted: list[tuple[str, str, dict]] = []

    def status(self) -> dict:
        return {"live": True, "jobs": []}

    def act(self, job: str, action: str, parameters) -> dict:
        self.acted.append((job, action, dict(parameters)))
        return {"name": job, "state": "PAUSED"}


@contextmanager
def serving(endpoint: ControlEndpoint, jobs: Jobs | None = None) -> Iterator[Jobs]:
    jobs = jobs or Jobs()
    server = ControlServer(endpoint, jobs.status, jobs.act, jobs.actions)
    server.start()
    try:
        yield jobs
    finally:
        server.stop()


def raw(endpoint: ControlEndpoint, method: str, path: str, headers: dict[str, str],
        body: bytes | None = None) -> tuple[int, dict]:
    """A request sent as given (no token unless ``headers`` has one): the status and the JSON answer."""
    http_connection = connection(endpoint, 30)
    try:
        try:
            http_connection.request(method, path, body=body, headers=headers)
        except BrokenPipeError:
            # http.client sends the body after the headers: a request refused on its headers can be answered,
            # and the connection closed, before the body goes out. The answer waits in the socket.
            pass
        response = http_connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        http_connection.close()


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A state directory other users can reach (pytest's own temp directories are closed to them), so
    that what keeps them out is the socket's own mode."""
    with tempfile.TemporaryDirectory(prefix="cb-control-") as parent:
        os.chmod(parent, 0o755)
        state = Path(parent) / "state"
        state.mkdir()
        yield state


def tcp_settings(state_dir: Path, token: str | None = None) -> DaemonSettings:
    return DaemonSettings(state_dir, control=f"127.0.0.1:{free_port()}", control_token=token)


def as_another_user(socket_path: str) -> str:
    if os.getuid() != 0 or not os.path.exists(SYSTEM_PYTHON):
        pytest.skip("needs root, to run a process as another user")
    return subprocess.run([SYSTEM_PYTHON, "-c", AS_ANOTHER_USER, socket_path], user="nobody", capture_output=True,
                          text=True, timeout=30, check=True).stdout


def test_by_default_the_endpoint_is_a_socket_in_the_state_dir_that_only_its_user_can_open(state_dir):
    settings = DaemonSettings(state_dir)
    endpoint = daemon_endpoint(settings)
    assert endpoint == client_endpoint(settings) and endpoint.token is None  # (the socket's mode is the check)
    assert endpoint.path == str(state_dir / "control.sock")
    with serving(endpoint):
        assert stat.S_IMODE(os.stat(endpoint.path).st_mode) == 0o600
        assert request(client_endpoint(settings), "GET", "/status") == {"live": True, "jobs": []}
        assert as_another_user(endpoint.path).strip() == "PermissionError"
    assert not os.path.exists(endpoint.path)  # removed as the daemon stops


def test_another_user_is_refused_even_where_the_socket_lets_it_in(state_dir):
    endpoint = daemon_endpoint(DaemonSettings(state_dir))
    with serving(endpoint) as jobs:
        os.chmod(endpoint.path, 0o666)  # as in the moment between the socket's creation and its chmod
        answer = as_another_user(endpoint.path)
    assert answer.startswith("403") and "only the daemon's own user" in answer, answer
    assert jobs.acted == []


def test_a_tcp_endpoint_asks_for_a_token_the_daemon_generates_and_the_cli_reads(state_dir):
    settings = tcp_settings(state_dir)
    endpoint = daemon_endpoint(settings)
    token_file = state_dir / TOKEN_NAME
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert endpoint.token and token_file.read_text().strip() == endpoint.token
    assert daemon_endpoint(settings).token == endpoint.token  # kept across restarts
    with serving(endpoint) as jobs:
        assert request(client_endpoint(settings), "POST", "/jobs/shop/pause") == {"name": "shop", "state": "PAUSED"}
        code, answer = raw(endpoint, "GET", "/status", {})
        assert code == 401 and "[daemon] control_token_env" in answer["error"] and TOKEN_NAME in answer["error"]
        code, _ = raw(endpoint, "POST", "/jobs/shop/stop", {"Authorization": "Bearer guessed",
                                                            "Content-Type": "application/json"}, b"{}")
        assert code == 401
        with pytest.raises(ControlError) as refused:
            request(ControlEndpoint(endpoint.address, "guessed"), "GET", "/status")
    assert jobs.acted == [("shop", "pause", {})]
    message = str(refused.value)
    assert "control token is required" in message and endpoint.token not in message and "guessed" not in message


def test_a_configured_token_is_the_one_asked_for_and_no_file_is_written(state_dir):
    settings = tcp_settings(state_dir, token="from-the-environment")
    assert daemon_endpoint(settings).token == client_endpoint(settings).token == "from-the-environment"
    assert not (state_dir / TOKEN_NAME).exists()


def test_a_token_file_other_users_can_read_is_not_used(state_dir):
    settings = tcp_settings(state_dir)
    daemon_endpoint(settings)
    (state_dir / TOKEN_NAME).chmod(0o644)
    with pytest.raises(ControlError, match="readable by other users: delete it"):
        daemon_endpoint(settings)


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_requests_a_browser_could_send_are_refused(state_dir, transport):
    settings = DaemonSettings(state_dir) if transport == "unix" else tcp_settings(state_dir)
    endpoint = daemon_endpoint(settings)
    token = {"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {}
    port = "" if transport == "unix" else f":{endpoint.host_port[1]}"
    json_body = {**token, "Content-Type": "application/json"}
    with serving(endpoint) as jobs:
        # A page's cross-origin POST, even one that got the token somehow, and its read of the status.
        from_a_page = {**json_body, "Origin": "https://evil.example"}
        assert raw(endpoint, "POST", "/jobs/shop/stop", from_a_page, b"{}")[0] == 403
        assert raw(endpoint, "GET", "/status", {**token, "Origin": "null"})[0] == 403
        # DNS rebinding: the browser names the attacker's host.
        code, answer = raw(endpoint, "GET", "/status", {**token, "Host": f"rebound.evil.example{port}"})
        assert code == 403 and "Host header" in answer["error"]
        for host in (f"localhost{port}", f"127.0.0.1{port}", f"[::1]{port}"):
            assert raw(endpoint, "GET", "/status", {**token, "Host": host})[0] == 200, host
        # Actions: a POST with a JSON object, nothing a form or a plain fetch() can send cross-origin.
        assert raw(endpoint, "GET", "/jobs/shop/stop", token)[0] == 405
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            assert raw(endpoint, "POST", "/jobs/shop/stop", {**token, "Content-Type": content_type}, b"{}")[0] == 415
        assert raw(endpoint, "POST", "/jobs/shop/stop", json_body, b"[1]")[0] == 400
        assert raw(endpoint, "POST", "/jobs/shop/reset?channel=lake.t", json_body, b"{}")[0] == 400
        assert raw(endpoint, "POST", "/jobs/shop/reset", json_body, b'{"channel": [1]}')[0] == 400
        assert jobs.acted == []
        code, _ = raw(endpoint, "POST", "/jobs/shop/reset", json_body, b'{"channel": ["lake.a", "lake.b"]}')
        assert code == 200 and jobs.acted == [("shop", "reset", {"channel": ["lake.a", "lake.b"]})]


def test_a_socket_path_too_long_for_unix_names_the_setting_not_the_path(tmp_path):
    state_dir = tmp_path / ("d" * 100) / "state"
    with pytest.raises(ControlError, match=r"over the 107 .*shorten \[daemon\] state_dir") as failure:
        daemon_endpoint(DaemonSettings(state_dir))  # (before Spark starts)
    assert "d" * 100 not in str(failure.value)
    with pytest.raises(ControlError, match=r"over the 107"):
        request(client_endpoint(DaemonSettings(state_dir)), "GET", "/status")


def test_nothing_listening_is_told_apart_from_a_refusal_without_naming_the_socket(state_dir):
    endpoint = client_endpoint(DaemonSettings(state_dir))
    with pytest.raises(ControlUnreachable) as unreachable:
        request(endpoint, "GET", "/status")
    assert "control.sock in [daemon] state_dir" in str(unreachable.value)
    assert str(state_dir) not in str(unreachable.value)


def test_a_socket_a_dead_daemon_left_is_replaced_but_a_live_one_or_another_file_is_not(state_dir):
    endpoint = ControlEndpoint(str(state_dir / "elsewhere.sock"))  # a configured path: no lock guards it
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(endpoint.path)  # what a SIGKILLed daemon leaves: a socket file nobody listens on
    left.close()
    with serving(endpoint):
        assert request(endpoint, "GET", "/status")["live"]
        with pytest.raises(ControlError, match="another process listens there"):
            ControlServer(endpoint, Jobs().status, Jobs().act, Jobs.actions)
        assert request(endpoint, "GET", "/status")["live"]  # still the first daemon's
    not_a_socket = state_dir / "state.db"
    not_a_socket.write_text("kept")
    with pytest.raises(ControlError, match="something other than a socket is at its path; nothing was removed"):
        ControlServer(ControlEndpoint(str(not_a_socket)), Jobs().status, Jobs().act, Jobs.actions)
    assert not_a_socket.read_text() == "kept"


def test_a_request_whose_length_is_not_a_number_is_refused(state_dir):
    endpoint = daemon_endpoint(DaemonSettings(state_dir))
    with serving(endpoint) as jobs:
        for length in ("\u00b2", "-1", "1e3"):
            code, _ = raw(endpoint, "POST", "/jobs/shop/stop", {"Content-Type": "application/json",
                                                                "Content-Length": length}, b"{}")
            assert code == 411, length
        assert jobs.acted == []
