"""A daemon stopping while a commit hangs in its target: bounded, reported, and a non-zero exit."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from canalbridge.daemon.config import Config, DaemonSettings
from canalbridge.daemon.exit_codes import STUCK
from canalbridge.daemon.service import Daemon
from canalbridge.daemon.status import job_json, render_text
from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.workload import Workload, WorkloadSpec
from spark_sink.settings import SparkSettings
from tests.integration.sync.harness import FAST_COMMITS, Harness, job_settings


def test_sigterm_during_a_hung_commit_returns_within_the_bound_and_exits_non_zero(dev_server_factory, tmp_path):
    hanging, release = threading.Event(), threading.Event()

    def hang(writer, position):
        hanging.set()
        release.wait(60)

    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(row_changes=500))
    commit = dataclasses.replace(FAST_COMMITS, stop_timeout_seconds=1.0)
    harness = Harness(server, workload, job_settings(server, workload, commit=commit),
                      **{"shop.orders": {"before_commit": hang}})
    harness.feed()
    config = Config(Path(tmp_path / "canalbridge.toml"), DaemonSettings(tmp_path / "state"), SparkSettings(),
                    (harness.job.settings,))
    stop = threading.Event()
    daemon = Daemon(config, stop)
    daemon.jobs[harness.job.name] = harness.job  # started by hand: no Spark in this test
    try:
        harness.job.start()
        assert hanging.wait(30)
        document = job_json(harness.job.record(), harness.job.settings)
        assert document["stuck"] == []  # hanging, but nobody asked it to stop yet
        stop.set()  # what SIGTERM does
        assert daemon.run(install_signals=False) == STUCK
        record = harness.job.record()
        assert record.stuck == ("channel-shop.orders",)
        assert "stuck (a commit hangs in the target): channel-shop.orders" in render_text(
            {"live": True, "jobs": [job_json(record, harness.job.settings)]})
        assert server.cursors("example").ack < server.cursors("example").put  # nothing uncommitted acked
    finally:
        release.set()
    assert harness.job.wait_unstuck(10)
