"""Replaying on purpose: each channel's own committed position decides what it applies (issue 33, hole 4).

The operator moves Canal's cursor back (here: the dev server is fed the
binlog again, as a Canal told to start from an earlier position sends it).
A target that lacks what comes again is written, whatever the job acked;
a target that holds it applies nothing twice. ``SyncJob.reset`` (``canalbridge
reset``) makes a target that kept its position (``DELETE FROM``) take it all again.
"""

from __future__ import annotations

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.sync.errors import JobStateError, SnapshotError
from canalbridge.sync.job import job as job_module
from canalbridge.sync.job.job import JobState

from .harness import Harness, job_settings


def _synced(dev_server_factory) -> Harness:
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(row_changes=400, rows_per_transaction=(1, 12)), BinlogWriter())
    harness = Harness(server, workload, job_settings(server, workload))
    harness.feed()
    harness.run_until_acked()
    harness.job.pause()
    harness.assert_tables()
    return harness


def _applied(harness: Harness) -> dict[str, int]:
    return {name: sum(commit.rows for commit in writer.commits) for name, writer in harness.writers.items()}


def _replay_from_the_start(harness: Harness) -> None:
    harness.server.feed("example", harness.workload_entries)  # Canal's cursor moved back to the first entry
    harness.job.resume()
    harness.wait_acked()
    harness.job.pause()


def test_a_target_emptied_is_rebuilt_when_canal_sends_the_binlog_again(dev_server_factory):
    harness = _synced(dev_server_factory)
    emptied, *others = sorted(harness.writers)
    harness.writers[emptied].empty(keep_position=False)  # dropped and created again: no position
    before = _applied(harness)
    _replay_from_the_start(harness)
    harness.assert_tables()
    after = _applied(harness)
    assert after[emptied] == 2 * before[emptied], "the emptied target takes every change again"
    assert {name: after[name] for name in others} == {name: before[name] for name in others}, \
        "a target that holds what comes again applies none of it"


def test_a_reset_channel_takes_everything_again_though_its_target_kept_its_position(dev_server_factory):
    harness = _synced(dev_server_factory)
    reset, *others = sorted(harness.writers)
    harness.writers[reset].empty(keep_position=True)  # DELETE FROM: the snapshots still say where it stood
    target = f"lake.{reset}"
    (record,) = harness.job.reset([target])
    assert record.target == target and harness.job.state is JobState.PAUSED
    assert harness.job.acks.position is None, "the ack decides nothing: a replay from an earlier file must pass"
    before = _applied(harness)
    _replay_from_the_start(harness)
    harness.assert_tables()
    after = _applied(harness)
    assert after[reset] == 2 * before[reset]
    assert {name: after[name] for name in others} == {name: before[name] for name in others}


def test_a_reset_of_the_whole_job_forgets_its_ack_and_every_position(dev_server_factory):
    harness = _synced(dev_server_factory)
    harness.job.reset()
    assert harness.job.acks.position is None
    assert all(writer.committed_position() is None for writer in harness.writers.values())
    assert all(record.committed is None for record in harness.job.record().channels)
    before = _applied(harness)
    _replay_from_the_start(harness)
    harness.assert_tables()
    assert _applied(harness) == {name: 2 * rows for name, rows in before.items()}


def test_a_reset_needs_a_paused_job_and_a_target_of_its_own(dev_server_factory):
    harness = _synced(dev_server_factory)
    with pytest.raises(KeyError, match=r"no channel writing 'lake\.nosuch'"):
        harness.job.reset(["lake.nosuch"])
    with pytest.raises(KeyError, match="no channel writing ''"):
        harness.job.reset([""])
    harness.job.resume()
    with pytest.raises(JobStateError, match="pause it before a reset"):
        harness.job.reset()
    harness.job.pause()


def test_a_target_waiting_for_a_rebuild_keeps_a_job_without_a_snapshot_from_starting(dev_server_factory):
    # Its channel would drop the table's changes, waiting for a snapshot that never comes.
    harness = _synced(dev_server_factory)
    marked = sorted(harness.writers)[0]
    with pytest.raises(JobStateError, match=r"add \[job.snapshot\]"):
        harness.job.rebuild(marked)  # (the command refuses such a job)
    assert harness.writers[marked].mark_rebuild()  # (marked by a run of the job that had one)
    with pytest.raises(SnapshotError, match="waits to be rebuilt"):
        harness.job.resume()
    assert harness.job.state is JobState.PAUSED and f"lake.{marked}" in harness.job.fail_message.text


def test_a_rebuild_refused_once_the_running_job_stopped_starts_it_again(dev_server_factory, monkeypatch):
    harness = _synced(dev_server_factory)
    harness.job.resume()
    channel = harness.job.settings.channels[0]
    monkeypatch.setattr(job_module, "channel_to_rebuild", lambda settings, table: channel)  # (as with a snapshot)
    harness.writers[channel.source].renamed_to = "shop.renamed"  # (its channel followed a RENAME TABLE)
    with pytest.raises(JobStateError, match=r"follows its table under the name shop\.renamed"):
        harness.job.rebuild(channel.source)
    assert harness.job.state is JobState.RUNNING, "the other tables stream on"
    harness.job.pause()
