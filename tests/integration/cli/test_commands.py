"""The console script: --version, devserver standalone, and run refusing a state directory it cannot use."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading

from canalbridge import __version__
from canalbridge.canal import CanalAuthError, CanalConnector
from canalbridge.daemon.state import STATE_FILE, StateStore
from tests.configs import VALID, write

CLI = [sys.executable, "-m", "canalbridge"]


def test_version():
    result = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == f"canalbridge {__version__}"


def test_devserver_runs_standalone_and_stops_on_sigterm():
    env = dict(os.environ, DEV_PASSWORD="s3cret")
    process = subprocess.Popen(
        [*CLI, "devserver", "--port", "0", "--destination", "dest1", "--user", "canal",
         "--password-env", "DEV_PASSWORD", "--workload", "300", "--tables", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"canal devserver listening on 127\.0\.0\.1:(\d+) destination dest1\n", line)
        assert match, line
        port = int(match.group(1))
        try:
            CanalConnector("127.0.0.1", port, "dest1", username="canal", password="wrong").connect()
            raise AssertionError("a wrong password was accepted")
        except CanalAuthError:
            pass
        rows = 0
        with CanalConnector("127.0.0.1", port, "dest1", username="canal", password="s3cret") as client:
            client.subscribe()
            for _ in range(100):  # bounded: 300 rows take a handful of gets
                batch = client.get_without_ack(500, timeout_ms=200)
                for entry in batch.entries:
                    rows += int({p.key: p.value for p in entry.header.props}.get("rowsCount", 0))
                client.ack(batch.batch_id)
                if rows >= 300:
                    break
        assert rows == 300
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "s3cret" not in stderr


def test_devserver_missing_password_env_is_a_clear_error():
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_VAR"}
    result = subprocess.run(
        [*CLI, "devserver", "--port", "0", "--password-env", "NO_SUCH_VAR"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert result.returncode == 2
    assert "NO_SUCH_VAR is not set" in result.stderr


def test_run_refuses_a_state_dir_it_cannot_use(tmp_path):
    config = write(tmp_path, VALID)
    (tmp_path / "state").write_text("a file where the state directory should be")
    result = subprocess.run([*CLI, "run", "-c", str(config)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert f"cannot use state directory {tmp_path / 'state'}" in result.stderr


def test_run_and_status_name_a_truncated_state_store(tmp_path):
    config = write(tmp_path, VALID)
    store = StateStore(tmp_path / "state")
    store.close()
    path = tmp_path / "state" / STATE_FILE
    path.write_bytes(path.read_bytes()[:100])
    for command in ("run", "status"):
        result = subprocess.run([*CLI, command, "-c", str(config)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 1, (command, result.stderr)
        assert str(path) in result.stderr and "secret-in-file" not in result.stderr + result.stdout, command


def test_status_of_a_stopped_daemon_needs_no_password_variable(tmp_path):
    config = write(tmp_path, VALID.replace('password = "secret-in-file"', 'password_env = "CANALBRIDGE_UNSET_PW"'))
    store = StateStore(tmp_path / "state")
    store.close()
    env = {k: v for k, v in os.environ.items() if k != "CANALBRIDGE_UNSET_PW"}
    result = subprocess.run([*CLI, "status", "-c", str(config)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "daemon: not running" in result.stdout
    assert "job a: PENDING (never run from this state directory)" in result.stdout
    assert "password ******" in result.stdout  # a password is configured, and not shown
    # Commands that connect still refuse to start without it.
    result = subprocess.run([*CLI, "validate", "-c", str(config)], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 2 and "CANALBRIDGE_UNSET_PW is not set" in result.stderr


def test_status_does_not_take_an_endpoint_that_answers_badly_for_a_daemon_that_is_down(tmp_path):
    # Something listens at the control address but closes every connection unanswered: the daemon may be
    # busy or broken, not down, so status must not present the state store's last record as the truth.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def refuse_to_answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                connection.close()

    threading.Thread(target=refuse_to_answer, daemon=True).start()
    try:
        control = f'state_dir = "state"\ncontrol = "127.0.0.1:{port}"'
        config = write(tmp_path, VALID.replace('state_dir = "state"', control))
        StateStore(tmp_path / "state").close()
        result = subprocess.run([*CLI, "status", "-c", str(config)], capture_output=True, text=True, timeout=120)
    finally:
        listener.close()
    assert result.returncode == 1, result.stdout
    assert f"control endpoint 127.0.0.1:{port} did not answer" in result.stderr
    assert "not running" not in result.stdout


def test_validate_offline_reads_no_secret_and_prints_json_for_a_ci_pipeline(tmp_path):
    config = write(tmp_path, VALID.replace('password = "secret-in-file"', 'password_env = "CANALBRIDGE_UNSET_PW"'))
    env = {k: v for k, v in os.environ.items() if k != "CANALBRIDGE_UNSET_PW"}
    env["CANALBRIDGE_CONFIG"] = str(config)  # (no -c: the variable names the file)
    result = subprocess.run([*CLI, "validate", "--offline", "--json"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["valid"] and document["offline"] and document["config"] == str(config)
    assert (document["jobs"], document["channels"], document["problems"]) == (1, 1, [])
    broken = write(tmp_path, VALID.replace("port = 11111", "port = -1"))
    result = subprocess.run([*CLI, "--config", str(broken), "validate", "--json", "--offline"], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 2 and not json.loads(result.stdout)["valid"]
    assert any("job[0].canal.port" in problem for problem in json.loads(result.stdout)["problems"])


def test_a_command_for_the_daemon_exits_4_when_none_runs(tmp_path):
    config = write(tmp_path, VALID)
    StateStore(tmp_path / "state").close()
    for line in (["pause", "a"], ["snapshot", "a"], ["verify", "a"], ["stop", "a", "--yes"]):
        result = subprocess.run([*CLI, *line, "-c", str(config)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 4, (line, result.stderr)
        assert "is not reachable" in result.stderr, line
