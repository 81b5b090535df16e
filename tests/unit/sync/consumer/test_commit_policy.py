"""When commits are due, and when they may split a source transaction."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.sync.consumer.policy import IN_FLIGHT_POLL_S, CommitPolicy, PendingWork
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from canalbridge.sync.source.link import Outstanding

SETTINGS = CommitSettings(interval_seconds=10, min_events=100, min_bytes=1000, max_bytes=5000,
                          store_capacity=1024, max_source_txn_wait_seconds=30, store_batch_mode="ITEMSIZE",
                          store_transaction_size=64)


def held(entries: int, size: int = 0) -> Outstanding:
    return Outstanding(entries, size)


def test_nothing_outstanding_is_never_due():
    assert CommitPolicy(SETTINGS, 64).due(PendingWork(0.0, events=10**6, bytes=10**9), held(0), now=100) is None


def test_due_reasons():
    policy = CommitPolicy(SETTINGS, 64)
    assert policy.due(PendingWork(0.0, events=1, bytes=5000), held(1), now=1) == "max_bytes"
    assert policy.due(PendingWork(0.0, events=100, bytes=1000), held(1), now=1) == "min_events_and_bytes"
    assert policy.due(PendingWork(0.0, events=100, bytes=999), held(1), now=1) is None
    assert policy.due(PendingWork(0.0, events=1, bytes=1), held(1), now=10) == "interval"
    assert policy.due(PendingWork(0.0, events=1, bytes=1), held(512), now=1) == "store_capacity"


def test_split_only_under_store_pressure_or_after_the_wait_bound():
    policy = CommitPolicy(SETTINGS, 64)
    open_txn = PendingWork(0.0, source_txn_open_since=5.0)
    assert policy.must_split_source_txn(open_txn, held(10), now=20) is None
    assert policy.must_split_source_txn(open_txn, held(10), now=35) == "source_txn_wait"
    assert policy.must_split_source_txn(open_txn, held(512), now=6) is None  # due at the next clean cut
    assert policy.must_split_source_txn(open_txn, held(960), now=6) == "store_capacity"  # a flush from full
    # Not while the source may still hand out the transaction's end (an ack just made room).
    assert policy.must_split_source_txn(open_txn, held(960), now=6, starved=False) is None


def test_store_pressure_counts_only_what_came_after_the_cut_of_the_commit_in_flight():
    policy = CommitPolicy(SETTINGS, 64)
    open_txn = PendingWork(0.0, events=1, bytes=1, source_txn_open_since=0.5)
    # 512 held in all, 500 of them the commit being applied's: acked when it lands.
    assert policy.due(open_txn, held(512), now=1, committing=held(500)) is None
    assert policy.must_split_source_txn(open_txn, held(512), now=1, committing=held(500)) is None
    assert policy.due(open_txn, held(1012), now=1, committing=held(500)) == "store_capacity"
    assert policy.must_split_source_txn(open_txn, held(1012), now=1, committing=held(500)) is None
    assert policy.must_split_source_txn(open_txn, held(1460), now=1, committing=held(500)) == "store_capacity"


def test_from_half_the_store_on_a_clean_cut_waits_for_the_commit_in_flight():
    # (The Consumer then lands the earlier commit and commits at that cut, rather than read on until a
    # small source transaction must be split.)
    policy = CommitPolicy(SETTINGS, 64)
    assert not policy.pressed(held(511))
    assert policy.pressed(held(512))
    assert not policy.pressed(held(1000), committing=held(500)), "what the commit in flight holds is acked soon"
    assert policy.pressed(held(1012), committing=held(500))


@dataclasses.dataclass(frozen=True)
class InFlight:
    outstanding: Outstanding
    landed: bool

    def done(self) -> bool:
        return self.landed


def test_while_a_commit_runs_the_next_transaction_reads_on_past_its_thresholds_up_to_max_bytes_or_pressure():
    policy = CommitPolicy(SETTINGS, 64)
    due = PendingWork(0.0, events=100, bytes=1000)
    running, landed = InFlight(held(5), landed=False), InFlight(held(5), landed=True)
    assert policy.cut_reason(due, held(10), now=1) == "min_events_and_bytes"
    assert policy.cut_reason(due, held(10), now=1, in_flight=landed) == "min_events_and_bytes"
    assert policy.cut_reason(due, held(10), now=1, in_flight=running) is None, "reads on"
    full = PendingWork(0.0, events=100, bytes=5000)
    assert policy.cut_reason(full, held(10), now=1, in_flight=running) == "max_bytes"
    # Half the store past the commit in flight's cut: wait for it and commit here.
    big = InFlight(held(500), landed=False)
    assert policy.cut_reason(due, held(1012), now=1, in_flight=big) == "store_capacity"
    inside = dataclasses.replace(due, source_txn_open_since=0.5)
    assert policy.cut_reason(inside, held(1012), now=1, in_flight=big) is None, (
        "no clean cut inside a source transaction: read on to its end")
    ddl = PendingWork(0.0, events=1, bytes=1, cut_due="ddl")
    assert policy.cut_reason(ddl, held(10), now=1, in_flight=running) == "ddl"
    assert policy.cut_reason(PendingWork(0.0, events=1, bytes=1), held(10), now=1) is None, "not due"


def test_a_take_waits_no_longer_than_the_interval_left_and_briefly_while_a_commit_runs():
    policy = CommitPolicy(SETTINGS, 64)
    work = PendingWork(0.0)
    assert policy.poll_timeout(work, now=0.0) == 1.0
    assert policy.poll_timeout(work, now=9.7) == pytest.approx(0.3)
    assert policy.poll_timeout(work, now=20.0) == 0.05
    assert policy.poll_timeout(work, now=0.0, committing=True) == IN_FLIGHT_POLL_S
    assert policy.poll_timeout(work, now=9.7, committing=True) == IN_FLIGHT_POLL_S, "shorter than the interval left"


def test_store_pressure_leaves_room_for_a_get_and_a_parser_flush():
    def entries(capacity, batch_size, mode="ITEMSIZE", flush=1024):
        settings = CommitSettings(store_capacity=capacity, store_batch_mode=mode, store_transaction_size=flush)
        return CommitPolicy(settings, batch_size).pressure_entries

    assert entries(16384, 8192) == 8192
    assert entries(16384, 1024) == 8192
    assert entries(4096, 16) == 2048
    assert entries(4096, 16, flush=3072) == 1024  # the store takes a flush only when it has room for all of it
    assert entries(64, 16, flush=16) == 32
    assert entries(64, 100, flush=16) == 1
    assert entries(64, 16) == 1  # a flush of 1024 fits only an empty store
    assert entries(16384, 8192, mode="MEMSIZE") == 8192  # batch_size counts memunits there


def test_memsize_mode_also_counts_the_bytes_the_store_holds():
    settings = CommitSettings(store_capacity=16384, store_memunit=1024, store_batch_mode="MEMSIZE")
    policy = CommitPolicy(settings, 8192)
    assert policy.pressure_bytes == 8 * 1024 * 1024
    work = PendingWork(0.0, events=10, bytes=10, source_txn_open_since=0.0)
    assert policy.due(work, held(10, 8 * 1024 * 1024 - 1), now=1) is None
    assert policy.due(work, held(10, 8 * 1024 * 1024), now=1) == "store_capacity"
    assert policy.must_split_source_txn(work, held(10, 8 * 1024 * 1024), now=1) == "store_capacity"
    quarter = CommitPolicy(settings, 4096)  # the get CanalSettings.fetch_size asks for: a quarter of the store
    assert quarter.pressure_bytes == 8 * 1024 * 1024  # due at the next clean cut from half the store
    assert quarter.split_bytes == 12 * 1024 * 1024  # split only within one get of full
    assert quarter.must_split_source_txn(work, held(10, 8 * 1024 * 1024), now=1) is None
    itemsize = CommitPolicy(dataclasses.replace(settings, store_batch_mode="ITEMSIZE"), 8192)
    assert itemsize.pressure_bytes is None
    assert itemsize.due(work, held(10, 1 << 40), now=1) is None


def test_a_get_asks_for_at_most_a_quarter_of_canals_store():
    # Issue 33, hole 5: a batch_size larger than the store made one get the whole store, ending inside a
    # transaction, and every commit had to split (the store-pressure bound fell to 1 byte).
    def fetch(batch_size: int, capacity: int) -> int:
        return CanalSettings("127.0.0.1", 11111, "d", batch_size=batch_size).fetch_size(
            CommitSettings(store_capacity=capacity))

    assert fetch(8192, 4096) == 1024
    assert fetch(8192, 16384) == 4096
    assert fetch(512, 16384) == 512
    assert fetch(8, 16) == 4
    memsize = CommitSettings(store_capacity=4096, store_batch_mode="MEMSIZE")
    assert CommitPolicy(memsize, fetch(8192, 4096)).pressure_bytes == 2 * 1024 * 1024  # not 1 byte


def test_subscription_filter_quotes_every_source():
    job = JobSettings(
        "j", CanalSettings("h", 1, "d"),
        (ChannelSettings("shop.orders", "lake.shop.orders"), ChannelSettings("we-ird.t$1", "lake.x.y")),
    )
    assert job.canal_filter == r"shop\.orders,we\-ird\.t\$1"


def test_settings_repr_hides_the_password():
    assert "hunter2" not in repr(CanalSettings("h", 1, "d", password="hunter2"))
