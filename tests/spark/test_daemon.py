"""The daemon from the command line, in a subprocess, against the dev server and real Iceberg."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from canalbridge.devserver import DestinationConfig
from canalbridge.devserver.catalog import standard_tables
from canalbridge.devserver.workload import Workload, WorkloadSpec
from spark_sink.verify import expected_typed, read_typed
from tests.helpers import eventually

CLI = [sys.executable, "-m", "canalbridge"]
PASSWORD = "pw-" + os.urandom(4).hex()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_config(tmp_path: Path, server_port: int, warehouse: str, namespace: str, tables) -> Path:
    channels = "\n".join(f'[[job.channel]]\nsource = "{t.qualified}"\ntarget = "lake.{namespace}.{t.name}"'
                         for t in tables)
    path = tmp_path / "canalbridge.toml"
    path.write_text(f"""
[daemon]
state_dir = "state"
control = "127.0.0.1:{free_port()}"
log_format = "json"
metrics_port = {free_port()}
[spark]
master = "local[2]"
warehouse = "{warehouse}"
[[job]]
name = "shop"
[job.canal]
host = "127.0.0.1"
port = {server_port}
destination = "example"
username = "canal"
password_env = "TEST_CANAL_PASSWORD"
batch_size = 1024
poll_timeout_ms = 100
[job.commit]
interval_seconds = 1
min_events = 2000
min_bytes = 1
retry_initial_seconds = 0.1
{channels}
""")
    path.chmod(0o600)
    return path


def env() -> dict[str, str]:
    return dict(os.environ, TEST_CANAL_PASSWORD=PASSWORD)


def start_daemon(config: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "run", "-c", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env())


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


def stop(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 0, stderr[-3000:]
    return stderr


def assert_exact(spark, workload, namespace):
    for name, expected in workload.expected.items():
        actual = read_typed(spark, f"lake.{namespace}.{expected.table.name}", expected.table)
        assert actual == expected_typed(expected.table, expected.rows.values()), name


def test_run_status_pause_resume_stop_and_restart(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(3)[1:]
    workload = Workload(WorkloadSpec(tables=tables, row_changes=1500, seed=31))
    server.feed("example", workload)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "cli", tables)
    with running_daemon(config) as daemon:
        assert server.destinations["example"].wait_acked(180), daemon.stderr and "daemon did not drain"
        live = status(config)
        job = live["jobs"][0]
        assert live["live"] and job["state"] == "RUNNING"
        assert job["config"]["canal"]["password"] == "******"
        assert [c["source"] for c in job["channels"]] == ["shop.accounts", "shop.orders"]
        assert job["ack_position"]["journal"] == "mysql-bin.000001" and job["delay_ms"] >= 0
        assert all(c["committed_position"] for c in job["channels"])
        text = cli("status", "-c", str(config))
        assert "job shop: RUNNING" in text.stdout and "shop.orders -> lake.cli.orders" in text.stdout
        assert PASSWORD not in text.stdout + json.dumps(live)

        metrics_port = int(config.read_text().split("metrics_port = ")[1].split()[0])
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
        assert 'canalbridge_job_state{job="shop",state="RUNNING"} 1.0' in metrics
        assert 'canalbridge_channel_rows_written_total{channel="shop.orders",job="shop"}' in metrics
        assert PASSWORD not in metrics

        second = start_daemon(config)
        _, second_err = second.communicate(timeout=120)
        assert second.returncode == 1 and "already uses state directory" in second_err

        assert "job shop: PAUSED" in cli("pause", "-c", str(config), "shop").stdout
        assert status(config)["jobs"][0]["state"] == "PAUSED"
        assert "job shop: RUNNING" in cli("resume", "-c", str(config), "shop").stdout
        stderr = stop(daemon)
    assert PASSWORD not in stderr
    assert all(json.loads(line) for line in stderr.splitlines() if line.startswith("{"))  # JSON lines

    offline = status(config)
    assert not offline["live"] and offline["jobs"][0]["state"] == "RUNNING"
    offline_ack, live_ack = offline["jobs"][0]["ack_position"], job["ack_position"]
    assert (offline_ack["journal"], offline_ack["offset"]) >= (live_ack["journal"], live_ack["offset"])

    with running_daemon(config) as daemon:
        assert eventually(lambda: cli("status", "-c", str(config), "--json").stdout.startswith("{")
                          and status(config)["live"], 120)
        assert "job shop: CANCELLED" in cli("stop", "-c", str(config), "shop").stdout
        stop(daemon)
    assert status(config)["jobs"][0]["state"] == "CANCELLED"
    assert status(config)["jobs"][0]["fail_message"]["kind"] == "USER_CANCEL"
    assert_exact(spark, workload, "cli")


def test_sigterm_mid_run_then_restart_is_exact(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(3)[1:]
    workload = Workload(WorkloadSpec(tables=tables, row_changes=4000, pk_change_ratio=0.2, seed=33))
    entries = list(workload)
    server.feed("example", entries)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "sigterm", tables)
    store = server.destinations["example"].store
    with running_daemon(config) as daemon:
        assert store.wait_for(lambda c: c.ack > len(entries) // 4, 180)  # some commits done, more to come
        stop(daemon)
    assert store.cursors().ack < len(entries) - 1
    with running_daemon(config) as daemon:
        assert server.destinations["example"].wait_acked(240)
        stop(daemon)
    assert_exact(spark, workload, "sigterm")


def test_demo_verifies_every_table(tmp_path):
    result = subprocess.run([*CLI, "demo", "--rows", "20000", "--workdir", str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "demo: all tables match" in result.stdout
    assert result.stdout.count(" OK") == 3
