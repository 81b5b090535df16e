"""The daemon as a subprocess, for the tests that drive ``canalbridge run`` from outside.

Its log goes to ``daemon.log`` next to the config rather than a pipe: a
daemon that logs a lot (py4j tracebacks when its JVM dies) must never block
on a full pipe that the test is not reading.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from canalbridge.daemon.config import load_config
from canalbridge.daemon.control import ControlError, request
from canalbridge.daemon.control_access import client_endpoint
from canalbridge.devkit.progress import die_with_parent
from tests.infra.processes import free_port

CLI = [sys.executable, "-m", "canalbridge"]
PASSWORD = "pw-" + os.urandom(4).hex()


def daemon_sections(warehouse: str, daemon_extra: str = "", spark: str | None = None) -> str:
    """``[daemon]`` and ``[spark]``: state in ./state, the control endpoint where it is by default (unless
    ``daemon_extra`` sets it), metrics on a free loopback port; Spark ``local[2]`` with a Hadoop catalog at
    ``warehouse``, unless ``spark`` gives the section's body."""
    spark = f'master = "local[2]"\nwarehouse = "{warehouse}"' if spark is None else spark
    return f"""
[daemon]
state_dir = "state"
log_format = "json"
metrics_port = {free_port()}
{daemon_extra}
[spark]
{spark}
"""


def job_section(name: str, *, port: int, destination: str, credentials: str, batch_size: int, min_events: int,
                host: str = "127.0.0.1", username: str = "canal", commit: str = "", channels: str = "") -> str:
    """One ``[[job]]`` with fast commits and retries; ``credentials`` is its password line."""
    return f"""
[[job]]
name = "{name}"
[job.canal]
host = "{host}"
port = {port}
destination = "{destination}"
username = "{username}"
{credentials}
batch_size = {batch_size}
poll_timeout_ms = 100
[job.commit]
interval_seconds = 1
min_events = {min_events}
min_bytes = 1
retry_initial_seconds = 0.1
{commit}
{channels}
"""


def write_config(tmp_path: Path, server_port: int, warehouse: str, namespace: str, tables, *,
                 commit: str = "", channels: str | None = None, daemon: str = "") -> Path:
    """One job ``shop`` reading destination ``example``, a channel per table into ``lake.NAMESPACE`` (or
    the ``[[job.channel]]`` sections given); ``daemon``: more ``[daemon]`` settings."""
    if channels is None:
        channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.{namespace}.{t.name}"'
                             for t in tables)
    path = tmp_path / "canalbridge.toml"
    path.write_text(daemon_sections(warehouse, daemon) + job_section(
        "shop", port=server_port, destination="example", credentials='password_env = "TEST_CANAL_PASSWORD"',
        batch_size=1024, min_events=2000, commit=commit, channels=channels))
    path.chmod(0o600)
    return path


def env() -> dict[str, str]:
    return dict(os.environ, TEST_CANAL_PASSWORD=PASSWORD)


def log_path(config: Path) -> Path:
    return config.parent / "daemon.log"


def daemon_log(config: Path) -> str:
    """Everything the daemons of this config have logged so far."""
    path = log_path(config)
    return path.read_text() if path.exists() else ""


def start_daemon(config: Path) -> subprocess.Popen:
    with open(log_path(config), "a") as log:
        # Dies with the test process, as the services do: a run cut short leaves no daemon (and Spark) behind.
        return subprocess.Popen([*CLI, "run", "-c", str(config)], stdout=log, stderr=log, text=True, env=env(),
                                preexec_fn=die_with_parent)


@contextlib.contextmanager
def running_daemon(config: Path) -> Iterator[subprocess.Popen]:
    """A daemon process that is killed on the way out if the test did not stop it."""
    daemon = start_daemon(config)
    try:
        yield daemon
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(60)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env(), timeout=180)


def status(config: Path) -> dict:
    result = cli("status", "-c", str(config), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def job_status(config: Path, name: str) -> dict | None:
    """One job's live status, or None while the control endpoint is not up yet.

    Asked in this process, as ``canalbridge status`` asks: tests poll it every 50 ms, and a CLI process
    per poll kept a core busy while the daemon under test needed it. ``status`` itself is tested through
    the CLI elsewhere.
    """
    settings = load_config(config, secrets=False)
    try:
        document = request(client_endpoint(settings.daemon), "GET", "/status", timeout=30)
    except ControlError:
        return None
    return next(job for job in document["jobs"] if job["name"] == name)


def metrics_text(config: Path) -> str:
    port = int(config.read_text().split("metrics_port = ")[1].split()[0])
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()


def metric(config: Path, sample: str) -> float:
    """The value of one sample line (name with labels) of the daemon's /metrics, 0 when absent."""
    for line in metrics_text(config).splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


def stop(process: subprocess.Popen, config: Path) -> str:
    """SIGTERM, wait for a clean exit, and return the log."""
    process.send_signal(signal.SIGTERM)
    process.wait(180)
    assert process.returncode == 0, daemon_log(config)[-3000:]
    return daemon_log(config)


def child_jvm(pid: int) -> int | None:
    """The pid of the java process the daemon started for Spark, if it runs."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        if name == "java" and int(rest[1]) == pid:
            return int(stat.parent.name)
    return None
