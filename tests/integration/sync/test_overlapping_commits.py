"""Commits overlap reading: the next transaction is routed while one is applied, acks stay in order."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from .harness import FAST_COMMITS
from .test_job_end_to_end import make

# Bounds on waits for something the Consumer does on its own thread; a pass takes far less.
ROUTED_WITHIN_S = 10.0
NOT_ROUTED_WITHIN_S = 1.0


class RoutedDuringCommit:
    """A ``before_commit`` hook: during the table's first commit, wait for the Consumer to route more
    entries (the next transaction), and say whether it did."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.stats = None  # the job's ConsumerStats, set by the test once the job exists
        self.routed: bool | None = None
        self.asked = threading.Event()

    def __call__(self, writer, position) -> None:
        if writer.commit_calls != 0:  # counted after this hook: only the first commit
            return
        at_cut = self.stats.entries
        deadline = time.monotonic() + self.timeout_s
        ticker = threading.Event()  # never set: the Consumer's counter has no condition to wait on
        while self.stats.entries == at_cut and time.monotonic() < deadline:
            ticker.wait(0.01)
        self.routed = self.stats.entries > at_cut
        self.asked.set()


@pytest.mark.parametrize("overlap", [True, False])
def test_the_next_transaction_is_routed_while_a_commit_is_applied_only_with_overlap(dev_server_factory, overlap):
    hook = RoutedDuringCommit(ROUTED_WITHIN_S if overlap else NOT_ROUTED_WITHIN_S)
    harness = make(dev_server_factory, row_changes=3000, commit=dataclasses.replace(FAST_COMMITS, overlap=overlap),
                   writer_options={"shop.orders": {"before_commit": hook}})
    hook.stats = harness.job.stats
    harness.run_until_acked()
    harness.job.pause()
    assert hook.asked.is_set()
    assert hook.routed is overlap
    harness.assert_exact()  # every ack after its commit, every row once


def test_a_commit_that_fails_aborts_the_transaction_read_behind_it_and_replays(dev_server_factory):
    hook = RoutedDuringCommit(ROUTED_WITHIN_S)
    harness = make(dev_server_factory, row_changes=3000,
                   writer_options={"shop.orders": {"before_commit": hook, "fail_commit_at": {1}}})
    hook.stats = harness.job.stats
    harness.run_until_acked()
    harness.job.pause()
    assert hook.routed  # the failing commit ran while the next transaction was open
    assert harness.job.stats.rollbacks == 1
    assert harness.writers["shop.orders"].aborts[0] == "commit failed"
    harness.assert_exact()  # what was read behind it was dropped and replayed, nothing acked early

