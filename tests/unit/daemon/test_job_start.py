"""Which jobs a daemon starts: a FINISHED snapshot-only job stays finished until its config says to stream on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from canalbridge.daemon.service import starts_with_daemon
from canalbridge.sync.errors import JobStateError
from canalbridge.sync.job.job import FailKind, FailMessage, JobState, SyncJob
from canalbridge.sync.model.record import JobRecord
from canalbridge.sync.settings import ChannelSettings, JobSettings, SnapshotSettings
from canalbridge.sync.source.canal.settings import CanalSettings

SNAPSHOT = SnapshotSettings(host="127.0.0.1", user="snapshotter", signal_table="db.canalbridge_signal")


def job(state: JobState, mode: str = "only") -> SyncJob:
    settings = JobSettings("shop", CanalSettings("127.0.0.1", 11111, "example"),
                           (ChannelSettings("db.t", "lake.db.t"),), snapshot=replace(SNAPSHOT, mode=mode))
    made = SyncJob(settings, lambda channel: pytest.fail("no sink is made before a start"))
    made.restore(JobRecord("shop", state, ()))
    return made


@pytest.mark.parametrize("state, mode, starts", [
    (JobState.PENDING, "only", True),
    (JobState.RUNNING, "only", True),
    (JobState.PAUSED, "only", False),
    (JobState.CANCELLED, "initial", False),
    (JobState.FINISHED, "only", False),
    (JobState.FINISHED, "initial", True),
    (JobState.FINISHED, "never", True),
])
def test_the_daemon_starts_new_and_running_jobs_and_finished_ones_told_to_stream_on(state, mode, starts):
    assert starts_with_daemon(job(state, mode)) is starts


@pytest.mark.parametrize("kind, starts", [(FailKind.OUTAGE, True), (FailKind.RUN_FAIL, False),
                                          (FailKind.SUBMIT_FAIL, False)])
def test_a_job_paused_by_an_outage_starts_with_the_daemon_and_one_paused_for_a_person_does_not(kind, starts):
    paused = job(JobState.PAUSED, "initial")
    paused.restore(JobRecord("shop", JobState.PAUSED, (), fail=FailMessage(kind, "why")))
    assert starts_with_daemon(paused) is starts


def test_a_finished_job_is_not_resumed_and_says_how_to_stream_on():
    with pytest.raises(JobStateError, match='set mode = "initial" and restart the daemon'):
        job(JobState.FINISHED).resume()
    with pytest.raises(JobStateError, match="cannot start from FINISHED"):
        job(JobState.FINISHED).start()
