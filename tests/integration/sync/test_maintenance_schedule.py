"""Each channel runs its target's maintenance between its commits: never during one, never holding an ack."""

from __future__ import annotations

import dataclasses
import threading

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.sync.job.job import JobState
from canalbridge.sync.settings import MaintenanceSettings

from .harness import FAST_COMMITS, Harness, job_settings

OFTEN = MaintenanceSettings(interval_minutes=0.001)  # due after every commit (60 ms)
TABLE = "shop.orders"


def make(dev_server_factory, maintenance: MaintenanceSettings, *, commit=FAST_COMMITS, on_maintenance=None):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(row_changes=2000))
    settings = dataclasses.replace(job_settings(server, workload, commit=commit), maintenance=maintenance)
    harness = Harness(server, workload, settings, **{TABLE: {"maintenance": on_maintenance}})
    harness.feed()
    return harness


def test_maintenance_runs_between_commits_and_the_sync_stays_exact(dev_server_factory):
    records = []

    def note_status(writer):
        records.append(harness.job.record())

    harness = make(dev_server_factory, OFTEN, on_maintenance=note_status)
    harness.run_until_acked()
    harness.job.pause()
    # The in-memory writer fails any commit that overlaps its maintenance: none did.
    assert harness.job.stats.rollbacks == 0
    harness.assert_exact()
    assert all(writer.maintenance_runs >= 1 for writer in harness.writers.values())
    assert harness.writers[TABLE].maintenance_runs <= len(harness.writers[TABLE].commits)  # one per commit at most
    # Status shows the run before each one (the first has none yet).
    shown = [c.maintenance for r in records[1:] for c in r.channels if c.source == TABLE]
    assert shown and all(text and "data files 0 -> 0" in text for text in shown), shown


def test_no_maintenance_when_it_is_off(dev_server_factory):
    harness = make(dev_server_factory, dataclasses.replace(OFTEN, enabled=False))
    harness.run_until_acked()
    harness.job.pause()
    assert all(writer.maintenance_runs == 0 for writer in harness.writers.values())


def test_a_failing_maintenance_is_reported_and_the_sync_goes_on(dev_server_factory):
    def fail(writer):
        raise RuntimeError("rewrite_data_files: the disk is full\n\tat org.apache.iceberg...")

    harness = make(dev_server_factory, OFTEN, on_maintenance=fail)
    harness.job.start()
    harness.wait_acked()
    shown = next(c.maintenance for c in harness.job.record().channels if c.source == TABLE)
    harness.job.pause()
    assert shown is not None and shown.endswith("failed: rewrite_data_files: the disk is full"), shown
    assert harness.job.stats.rollbacks == 0
    harness.assert_exact()


def test_a_maintenance_longer_than_the_commit_timeout_is_waited_for(dev_server_factory):
    started, release = threading.Event(), threading.Event()

    def slow_once(writer):
        if writer.maintenance_runs == 1:
            started.set()
            assert release.wait(60)

    commit = dataclasses.replace(FAST_COMMITS, commit_timeout_seconds=1.0)
    harness = make(dev_server_factory, OFTEN, commit=commit, on_maintenance=slow_once)
    harness.job.start()
    try:
        assert started.wait(30)
        # The next commit (due within 0.2 s) waits behind the maintenance, past the commit timeout.
        assert not harness.job.wait_state(JobState.PAUSED, 4), harness.job.fail_message
    finally:
        release.set()
    harness.wait_acked()
    harness.job.pause()
    harness.assert_exact()


def test_a_maintenance_that_hangs_past_its_timeout_pauses_the_job_naming_it(dev_server_factory):
    release = threading.Event()

    def hang(writer):
        assert release.wait(60)

    commit = dataclasses.replace(FAST_COMMITS, commit_timeout_seconds=1.0, stop_timeout_seconds=1.0)
    harness = make(dev_server_factory, dataclasses.replace(OFTEN, timeout_seconds=2), commit=commit,
                   on_maintenance=hang)
    job = harness.job
    try:
        job.start()
        assert job.wait_state(JobState.PAUSED, 30)
        text = job.fail_message.text
        assert f"channel {TABLE}" in text and "the table maintenance did not finish in 2 s" in text, text
        assert "(maintenance.timeout_seconds)" in text
    finally:
        release.set()
    assert job.wait_unstuck(10)
    job.settings = dataclasses.replace(job.settings, maintenance=dataclasses.replace(OFTEN, enabled=False))
    job.resume()
    harness.wait_acked()
    job.pause()
    harness.assert_exact()
