"""Faults the daemon must survive: each ends with every target exact and no duplicate change."""

from __future__ import annotations

import json
import random
import shutil
import signal
import threading

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.workload import Workload, WorkloadSpec
from tests.daemon_process import PASSWORD, cli, running_daemon, stop, write_config
from tests.helpers import eventually
from tests.integration.faults.checks import assert_changelog_once, assert_upsert_exact, changelog_config

# Twenty until stop 48, ten until stop 54, eight until stop 55: each kill more, at a seeded moment of the same
# kinds, costs ~20 s a run.
KILLS = 6
NEW_HOST_AFTER = 3  # the kill after which the state_dir goes (a test of its own until stop 54)


@pytest.mark.timeout(900)  # seven JVM starts
def test_sigkills_and_a_new_host_then_exact_tables_and_no_duplicate_change(spark, spark_settings,
                                                                               dev_server_factory, tmp_path):
    """SIGKILLs at seeded moments; after the fourth the daemon moves to a new host: the same config and
    nothing of the old ``state_dir``. Each table's position is in its own snapshots, so every change lands
    once all the same."""
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(3)[1:]  # orders (upsert), accounts (changelog)
    workload = Workload(WorkloadSpec(tables=tables, row_changes=6000, pk_change_ratio=0.2, seed=41))
    entries = list(workload)
    server.feed("example", entries)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "killed", tables)
    changelog_config(config, "accounts")
    moments = random.Random(7)
    pause = threading.Event()  # never set: waits below are the random kill moments, not synchronisation
    progress = []
    store = server.destinations["example"].store
    for kill in range(KILLS):
        with running_daemon(config) as daemon:
            assert server.wait_sessions(1, 120), "the daemon never connected"
            if kill % 2:
                # Right after a commit was acked: the next gets, sends and MERGE are under way.
                # Once everything is acked no further ack can come: do not wait for one.
                acked = store.cursors().ack
                store.wait_for(lambda c, acked=acked: c.ack > acked or c.ack == c.put, 60)
                pause.wait(moments.uniform(0.0, 1.5))
            else:
                # Early in the daemon's life: during gets, sends, the first MERGE.
                pause.wait(moments.uniform(0.5, 4.0))
            daemon.send_signal(signal.SIGKILL)
            daemon.wait(60)
        assert server.wait_sessions(0, 30)
        progress.append(server.cursors("example").ack)
        if kill == NEW_HOST_AFTER:
            assert 0 < progress[-1] < store.cursors().put, "the host moved before any ack, or after the last"
            shutil.rmtree(tmp_path / "state")  # the old host is gone, and its state with it
    with running_daemon(config) as daemon:
        assert server.wait_sessions(1, 120)
        assert server.destinations["example"].wait_acked(300), "did not converge after the kills"
        status = json.loads(cli("status", "-c", str(config), "--json").stdout)
        assert status["jobs"][0]["state"] == "RUNNING"
        stop(daemon, config)
    assert progress[-1] > progress[0]  # the kills landed while work was being done

    assert_upsert_exact(spark, workload, "shop.orders", "lake.killed.orders")
    assert_changelog_once(spark, entries, "shop.accounts", "lake.killed.accounts")
    record_kills(tmp_path, KILLS, progress)


def record_kills(tmp_path, kills: int, progress: list[int]) -> None:
    (tmp_path / "kills.json").write_text(json.dumps({"kills": kills, "ack_after_each_kill": progress}))


def test_canal_server_outage_then_back_converges(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(2)[1:]
    workload = Workload(WorkloadSpec(tables=tables, row_changes=3000, seed=43))
    server.feed("example", workload)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "outage", tables)
    with running_daemon(config) as daemon:
        store = server.destinations["example"].store
        assert store.wait_for(lambda c: c.ack > 500, 180)
        server.stop()  # connection refused from now on
        outage = threading.Event()
        outage.wait(3.0)  # the length of the outage: the receiver retries meanwhile
        server.start()  # same port, same ack cursor
        assert server.destinations["example"].wait_acked(240)
        status = json.loads(cli("status", "-c", str(config), "--json").stdout)
        assert status["jobs"][0]["state"] == "RUNNING"
        stop(daemon, config)
    assert_upsert_exact(spark, workload, "shop.orders", "lake.outage.orders")


def test_wrong_password_pauses_the_job_with_a_named_reason(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", "the-real-password"))
    tables = standard_tables(2)[1:]
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "badauth", tables)
    config.write_text(config.read_text().replace("retry_initial_seconds = 0.1",
                                                 "retry_initial_seconds = 0.1\nreconnect_attempts = 2"))
    with running_daemon(config) as daemon:
        def paused() -> bool:
            result = cli("status", "-c", str(config), "--json")
            return result.returncode == 0 and json.loads(result.stdout)["jobs"][0]["state"] == "PAUSED"

        assert eventually(paused, 180)
        job = json.loads(cli("status", "-c", str(config), "--json").stdout)["jobs"][0]
        assert "authentication failed for user 'canal'" in job["fail_message"]["text"]
        assert f"127.0.0.1:{server.port}" in job["fail_message"]["text"]
        assert server.cursors("example").ack == -1
        stderr = stop(daemon, config)
    assert PASSWORD not in stderr and PASSWORD not in json.dumps(job)
