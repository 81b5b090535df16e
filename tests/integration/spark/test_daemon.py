"""The daemon from the command line, in a subprocess, against the dev server and real Iceberg."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.progress import die_with_parent
from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.devkit.workload import Workload, WorkloadSpec
from tests.daemon_process import (
    CLI,
    PASSWORD,
    cli,
    daemon_log,
    metrics_text,
    running_daemon,
    start_daemon,
    status,
    stop,
    write_config,
)
from tests.helpers import eventually
from tests.infra.processes import free_port


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
        assert server.destinations["example"].wait_acked(180), daemon_log(config)[-3000:]
        live = status(config)
        job = live["jobs"][0]
        assert live["live"] and job["state"] == "RUNNING"
        assert job["config"]["canal"]["password"] == "******"
        assert [c["source"] for c in job["channels"]] == ["shop.accounts", "shop.orders"]
        assert job["ack_position"]["journal"] == "mysql-bin.000001" and job["delay_ms"] >= 0
        assert all(c["committed_position"] for c in job["channels"])
        assert [c["layout_note"] for c in job["channels"]] == [None, None]  # tables it created
        text = cli("status", "-c", str(config))
        assert "job shop: RUNNING" in text.stdout and "shop.orders -> lake.cli.orders" in text.stdout
        assert PASSWORD not in text.stdout + json.dumps(live)

        metrics = metrics_text(config)
        assert 'canalbridge_job_state{state="RUNNING",sync_job="shop"} 1.0' in metrics
        assert 'canalbridge_channel_rows_written_total{channel="shop.orders",sync_job="shop"}' in metrics
        assert PASSWORD not in metrics

        second = start_daemon(config)
        assert second.wait(120) == 1 and "already uses state directory" in daemon_log(config)

        assert "job shop: PAUSED" in cli("pause", "-c", str(config), "shop").stdout
        assert status(config)["jobs"][0]["state"] == "PAUSED"
        assert "job shop: RUNNING" in cli("resume", "-c", str(config), "shop").stdout
        stderr = stop(daemon, config)
    assert PASSWORD not in stderr
    # Every call above went through the default socket, which no line names by its path.
    assert "control socket (control.sock in [daemon] state_dir)" in stderr
    assert str(tmp_path / "state" / "control.sock") not in stderr + json.dumps(live) + text.stdout
    assert all(json.loads(line) for line in stderr.splitlines() if line.startswith("{"))  # JSON lines

    offline = status(config)
    assert not offline["live"] and offline["jobs"][0]["state"] == "RUNNING"
    offline_ack, live_ack = offline["jobs"][0]["ack_position"], job["ack_position"]
    assert (offline_ack["journal"], offline_ack["offset"]) >= (live_ack["journal"], live_ack["offset"])

    with running_daemon(config) as daemon:
        assert eventually(lambda: cli("status", "-c", str(config), "--json").stdout.startswith("{")
                          and status(config)["live"], 120)
        refused = cli("reset", "-c", str(config), "shop", "--yes")
        assert refused.returncode == 1 and "shop is RUNNING: pause it before a reset" in refused.stderr
        assert "job shop: PAUSED" in cli("pause", "-c", str(config), "shop").stdout
        # (A rebuild reads the table again from the source: this job has no [job.snapshot] to do it with.)
        unconfirmed = cli("rebuild", "-c", str(config), "shop", "shop.orders")
        assert unconfirmed.returncode == 1 and "confirm with --yes" in unconfirmed.stderr
        no_snapshot = cli("rebuild", "-c", str(config), "shop", "shop.orders", "--yes")
        assert no_snapshot.returncode == 1 and "add [job.snapshot]" in no_snapshot.stderr, no_snapshot.stderr
        unconfirmed = cli("reset", "-c", str(config), "shop", "--channel", "lake.cli.orders")
        assert unconfirmed.returncode == 1 and "confirm with --yes" in unconfirmed.stderr
        unknown = cli("reset", "-c", str(config), "shop", "--channel", "lake.cli.nosuch", "--yes")
        assert unknown.returncode == 1 and "no channel writing 'lake.cli.nosuch'" in unknown.stderr
        reset = cli("reset", "-c", str(config), "shop", "--channel", "lake.cli.orders", "--yes")
        assert reset.returncode == 0 and "job shop: PAUSED, reset" in reset.stdout, reset.stderr
        after = status(config)["jobs"][0]
        positions = {c["target"]: c["committed_position"] for c in after["channels"]}
        assert positions["lake.cli.orders"] is None and positions["lake.cli.accounts"] is not None
        assert after["ack_position"] is None and after["state"] == "PAUSED"
        assert "job.reset" in daemon_log(config)
        unconfirmed = cli("stop", "-c", str(config), "shop")
        assert unconfirmed.returncode == 1 and "a stop cancels job shop for good; confirm with --yes" in (
            unconfirmed.stderr)
        assert "job shop: CANCELLED" in cli("--log-level", "warning", "stop", "shop", "--yes", "-c", str(config)).stdout
        stop(daemon, config)
    assert status(config)["jobs"][0]["state"] == "CANCELLED"
    assert status(config)["jobs"][0]["fail_message"]["kind"] == "USER_CANCEL"
    assert_exact(spark, workload, "cli")


def test_sigterm_mid_run_then_restart_is_exact(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(3)[1:]
    workload = Workload(WorkloadSpec(tables=tables, row_changes=4000, pk_change_ratio=0.2, seed=33))
    entries = list(workload)
    # The last quarter is fed only once the daemon is stopped, so the SIGTERM always lands mid-run: a daemon
    # faster than this test's own calls in between cannot have drained the whole workload first.
    held_back = len(entries) * 3 // 4
    server.feed("example", entries[:held_back])
    # A config from before issue 38, with the endpoint on TCP and no token: it asks for the one the daemon
    # wrote, which the CLI reads.
    address = f"127.0.0.1:{free_port()}"
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "sigterm", tables,
                          daemon=f'control = "{address}"')
    store = server.destinations["example"].store
    with running_daemon(config) as daemon:
        assert store.wait_for(lambda c: c.ack > len(entries) // 4, 180)  # some commits done, more to come
        assert status(config)["live"]
        token = (tmp_path / "state" / "control.token").read_text().strip()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{address}/status", timeout=30)
        assert refused.value.code == 401
        stop(daemon, config)
    assert len(entries) // 4 < store.cursors().ack <= held_back
    server.feed("example", entries[held_back:])
    with running_daemon(config) as daemon:
        assert server.destinations["example"].wait_acked(240)
        assert "job shop: PAUSED" in cli("pause", "-c", str(config), "shop").stdout  # the same token, restarted
        log = stop(daemon, config)
    assert token not in log
    assert_exact(spark, workload, "sigterm")


def test_demo_whose_dev_server_dies_stops_within_seconds_and_names_the_cause(tmp_path):
    with open(tmp_path / "stderr.log", "w") as stderr:  # Spark's warnings: never a pipe nobody reads
        demo = subprocess.Popen([*CLI, "demo", "--rows", "20000", "--workdir", str(tmp_path)],
                                stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=die_with_parent)
    try:
        lines = iter(demo.stdout.readline, "")
        server = next(int(m.group(1)) for line in lines if (m := re.search(r"dev server \(pid (\d+)\)", line)))
        next(line for line in lines if re.search(r"committed [1-9][\d,]* rows", line))  # in the middle of it
        os.kill(server, signal.SIGKILL)
        killed = time.monotonic()
        rest = demo.stdout.read()
        assert demo.wait(30) == 1
        assert time.monotonic() - killed < 30
    finally:
        demo.kill()
    assert f"demo: FAILED: the dev server (pid {server}) was killed by signal 9 before every change was acked" \
        in rest, rest[-3000:]


def test_a_pattern_job_lists_each_patterns_tables_live_offline_and_after_a_restart(spark, spark_settings,
                                                                                 dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(3)[1:]
    workload = Workload(WorkloadSpec(tables=tables, row_changes=600, seed=37))
    server.feed("example", workload)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "pat", tables,
                          channels='[[job.channel]]\nsource = "shop.*"\ntarget = "lake.pat.{table}"')
    expected = {"shop.accounts": "lake.pat.accounts", "shop.orders": "lake.pat.orders"}

    def listed(document) -> dict[str, str]:
        channels = document["jobs"][0]["channels"]
        assert all(c["rule"] == "shop.*" and c["committed_position"] for c in channels), channels
        return {c["source"]: c["target"] for c in channels}

    with running_daemon(config) as daemon:
        assert server.destinations["example"].wait_acked(180), daemon_log(config)[-3000:]
        assert listed(status(config)) == expected
        text = cli("status", "-c", str(config)).stdout
        assert "  pattern shop.* -> lake.pat.{table}: 2 tables so far\n    shop.accounts -> lake.pat.accounts" in text
        stop(daemon, config)
    assert listed(status(config)) == expected  # from the state store
    with running_daemon(config) as daemon:
        # Nothing new to read: the channels are not open in this run, and status still lists them.
        assert eventually(lambda: status(config)["live"], 120)
        assert listed(status(config)) == expected
        stop(daemon, config)
    assert_exact(spark, workload, "pat")
