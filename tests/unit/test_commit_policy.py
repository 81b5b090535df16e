"""When commits are due, and when they may split a source transaction."""

from __future__ import annotations

from canalbridge.sync.commit_policy import CommitPolicy, PendingWork
from canalbridge.sync.settings import (
    CanalSettings,
    ChannelSettings,
    CommitSettings,
    JobSettings,
)

SETTINGS = CommitSettings(interval_seconds=10, min_events=100, min_bytes=1000, max_bytes=5000,
                          store_capacity=1024, max_source_txn_wait_seconds=30)


def test_nothing_outstanding_is_never_due():
    assert CommitPolicy(SETTINGS, 64).due(PendingWork(0.0, events=10**6, bytes=10**9), 0, now=100) is None


def test_due_reasons():
    policy = CommitPolicy(SETTINGS, 64)
    assert policy.due(PendingWork(0.0, events=1, bytes=5000), 1, now=1) == "max_bytes"
    assert policy.due(PendingWork(0.0, events=100, bytes=1000), 1, now=1) == "min_events_and_bytes"
    assert policy.due(PendingWork(0.0, events=100, bytes=999), 1, now=1) is None
    assert policy.due(PendingWork(0.0, events=1, bytes=1), 1, now=10) == "interval"
    assert policy.due(PendingWork(0.0, events=1, bytes=1), 512, now=1) == "store_capacity"


def test_split_only_under_store_pressure_or_after_the_wait_bound():
    policy = CommitPolicy(SETTINGS, 64)
    open_txn = PendingWork(0.0, source_txn_open_since=5.0)
    assert policy.must_split_source_txn(open_txn, 10, now=20) is None
    assert policy.must_split_source_txn(open_txn, 10, now=35) == "source_txn_wait"
    assert policy.must_split_source_txn(open_txn, 512, now=6) == "store_capacity"


def test_store_pressure_threshold_leaves_room_for_a_batch():
    assert CommitPolicy(CommitSettings(store_capacity=16384), 8192).pressure_entries == 8192
    assert CommitPolicy(CommitSettings(store_capacity=16384), 1024).pressure_entries == 8192
    assert CommitPolicy(CommitSettings(store_capacity=64), 16).pressure_entries == 32
    assert CommitPolicy(CommitSettings(store_capacity=64), 100).pressure_entries == 1


def test_subscription_filter_quotes_every_source():
    job = JobSettings(
        "j", CanalSettings("h", 1, "d"),
        (ChannelSettings("shop.orders", "lake.shop.orders"), ChannelSettings("we-ird.t$1", "lake.x.y")),
    )
    assert job.canal_filter == r"shop\.orders,we\-ird\.t\$1"


def test_settings_repr_hides_the_password():
    assert "hunter2" not in repr(CanalSettings("h", 1, "d", password="hunter2"))
