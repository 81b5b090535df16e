"""Spark and Iceberg failing under the daemon: a killed JVM, an unwritable warehouse, a full Canal store."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.workload import Workload, WorkloadSpec
from tests.daemon_process import (
    PASSWORD,
    child_jvm,
    cli,
    daemon_log,
    job_status,
    metric,
    running_daemon,
    status,
    stop,
    write_config,
)
from tests.helpers import at_transaction_ends, eventually
from tests.integration.faults.checks import assert_changelog_once, assert_upsert_exact, changelog_config


@pytest.mark.timeout(900)
def test_killed_spark_jvm_is_replaced_and_the_job_converges(spark, spark_settings, dev_server_factory, tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(3)[1:]  # orders (upsert), accounts (changelog)
    workload = Workload(WorkloadSpec(tables=tables, row_changes=8000, pk_change_ratio=0.2, seed=51))
    entries = list(workload)
    server.feed("example", entries)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "jvmkill", tables)
    changelog_config(config, "accounts")
    store = server.destinations["example"].store
    with running_daemon(config) as daemon:
        for _ in range(2):
            # Right after an ack the next commit is being staged or merged.
            acked = store.cursors().ack
            assert store.wait_for(lambda c, acked=acked: c.ack > acked, 240), daemon_log(config)[-3000:]
            assert eventually(lambda: child_jvm(daemon.pid) is not None, 120)
            jvm = child_jvm(daemon.pid)
            assert jvm is not None
            os.kill(jvm, signal.SIGKILL)
            assert eventually(lambda jvm=jvm: child_jvm(daemon.pid) not in (None, jvm), 240), "no new JVM"
        assert server.destinations["example"].wait_acked(300), daemon_log(config)[-3000:]
        assert status(config)["jobs"][0]["state"] == "RUNNING"
        log = stop(daemon, config)
    assert log.count("spark.session_lost") >= 1
    assert PASSWORD not in log
    assert_upsert_exact(spark, workload, "shop.orders", "lake.jvmkill.orders")
    assert_changelog_once(spark, entries, "shop.accounts", "lake.jvmkill.accounts")


@pytest.mark.timeout(900)
def test_unwritable_warehouse_retries_then_pauses_and_resume_converges(spark, spark_settings, dev_server_factory,
                                                                       tmp_path):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD))
    tables = standard_tables(2)[1:]  # orders
    workload = Workload(WorkloadSpec(tables=tables, row_changes=3000, seed=53))
    entries = list(workload)
    thirds = at_transaction_ends(entries, 3)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "readonly", tables,
                          commit="retries = 4\nretry_max_seconds = 2")
    data_dir = Path(spark_settings.warehouse) / "readonly" / "orders" / "data"
    moved = data_dir.with_name("data.moved")
    destination = server.destinations["example"]

    def make_unwritable() -> None:
        # Running as root, chmod would not stop the writes: a file where the directory was does.
        data_dir.rename(moved)
        data_dir.write_text("not a directory: new data files cannot be written")

    def make_writable() -> None:
        data_dir.unlink()
        shutil.move(str(moved), str(data_dir))

    server.feed("example", thirds[0])
    with running_daemon(config) as daemon:
        assert destination.wait_acked(240), daemon_log(config)[-3000:]

        # Briefly unwritable: the job retries and carries on by itself.
        make_unwritable()
        ack_before = destination.store.cursors().ack
        server.feed("example", thirds[1])
        assert eventually(lambda: metric(config, 'canalbridge_retries_total{sync_job="shop"}') >= 1, 120)
        assert destination.store.cursors().ack == ack_before  # nothing acked while commits fail
        make_writable()
        assert destination.wait_acked(240), daemon_log(config)[-3000:]
        assert job_status(config, "shop")["state"] == "RUNNING"

        # Unwritable for longer than the retries: the job pauses with the reason, resume converges.
        make_unwritable()
        ack_before = destination.store.cursors().ack
        server.feed("example", thirds[2])
        assert eventually(lambda: (job_status(config, "shop") or {}).get("state") == "PAUSED", 240)
        reason = job_status(config, "shop")["fail_message"]["text"]
        assert "channel shop.orders" in reason and "data" in reason, reason
        assert destination.store.cursors().ack == ack_before
        make_writable()
        assert "job shop: RUNNING" in cli("resume", "-c", str(config), "shop").stdout
        assert destination.wait_acked(240), daemon_log(config)[-3000:]
        stop(daemon, config)
    assert_upsert_exact(spark, workload, "shop.orders", "lake.readonly.orders")


@pytest.mark.timeout(600)
def test_small_canal_store_and_slow_commits_still_converge(spark, spark_settings, dev_server_factory, tmp_path):
    capacity = 256
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD, capacity=capacity))
    tables = standard_tables(2)[1:]  # orders
    # Source transactions of up to 600 row events: several times what the store holds un-acked.
    workload = Workload(WorkloadSpec(tables=tables, row_changes=2000, rows_per_transaction=(50, 600),
                                     rows_per_event=1, seed=57))
    server.feed("example", workload)
    config = write_config(tmp_path, server.port, spark_settings.warehouse, "smallstore", tables)
    config.write_text(config.read_text().replace("batch_size = 1024", f"batch_size = 64\nstore_capacity = {capacity}"))
    warning = cli("validate", "-c", str(config))
    assert warning.returncode == 0
    assert f"min_events: 2000 events exceed what Canal's store holds without an ack ({capacity}" in warning.stderr
    with running_daemon(config) as daemon:
        assert server.destinations["example"].wait_acked(400), daemon_log(config)[-3000:]
        log = stop(daemon, config)
    assert "consumer.splitting_source_txn" in log  # transactions larger than the store went through in parts
    assert_upsert_exact(spark, workload, "shop.orders", "lake.smallstore.orders")
