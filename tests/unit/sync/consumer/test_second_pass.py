"""Entries Canal's first pass missed are told apart from entries it sends again."""

from __future__ import annotations

import pytest
import structlog

from canalbridge.sync.consumer.second_pass import RoutedSinceEnd, SecondPass
from canalbridge.sync.model.position import EntryPosition, Refill


def at(offset: int, journal: str = "mysql-bin.000001") -> EntryPosition:
    return EntryPosition(journal, offset)


def first_pass(routed: RoutedSinceEnd, *offsets: int, end: int | None = None) -> None:
    """Route a transaction end at ``end``, then rows at ``offsets``: nothing is missed on the way."""
    if end is not None:
        assert not routed.missed(at(end), transaction_end=True)
    for offset in offsets:
        assert not routed.missed(at(offset), transaction_end=False)


def test_entries_past_all_routed_are_never_missed():
    routed = RoutedSinceEnd()
    first_pass(routed, 10, 20, end=5)
    assert not routed.missed(at(30), transaction_end=False)


def test_an_entry_sent_again_is_not_missed_and_one_the_first_pass_skipped_is():
    routed = RoutedSinceEnd()
    first_pass(routed, 10, 20, 40, end=5)  # 30 never came
    # The second pass, from the transaction end:
    assert not routed.missed(at(5), transaction_end=True)
    assert not routed.missed(at(10), transaction_end=False)
    assert routed.missed(at(30), transaction_end=False)
    assert not routed.missed(at(40), transaction_end=False)


def test_nothing_before_the_last_transaction_end_counts_as_missed():
    # Canal never goes back further than the last end it put.
    routed = RoutedSinceEnd()
    first_pass(routed, 10, 20, end=5)
    first_pass(routed, 50, end=40)
    assert not routed.missed(at(30), transaction_end=False)
    assert not routed.missed(at(40), transaction_end=True)


def test_a_missed_entry_stays_missed_until_the_channel_that_applies_it_commits():
    routed = RoutedSinceEnd()
    first_pass(routed, 10, 40, end=5)
    assert routed.missed(at(20), transaction_end=False)
    routed.fill(at(20), "shop.orders")
    routed.aborted(unsettled=set())  # the transaction that applied it was rolled back
    assert routed.missed(at(20), transaction_end=False)
    routed.fill(at(20), "shop.orders")
    routed.committed("shop.accounts")  # another channel's commit does not count
    assert routed.missed(at(20), transaction_end=False)
    routed.fill(at(20), "shop.orders")
    routed.committed("shop.orders")
    assert not routed.missed(at(20), transaction_end=False)


def test_a_missed_entry_no_channel_applies_counts_as_routed_at_once():
    routed = RoutedSinceEnd()
    first_pass(routed, 10, 40, end=5)
    assert routed.missed(at(20), transaction_end=False)
    routed.fill(at(20), None)
    assert not routed.missed(at(20), transaction_end=False)


def test_the_window_spans_a_binlog_rotation():
    routed = RoutedSinceEnd()
    first_pass(routed, end=900)
    assert not routed.missed(at(4, "mysql-bin.000002"), transaction_end=False)
    assert not routed.missed(at(30, "mysql-bin.000002"), transaction_end=False)
    assert routed.missed(at(10, "mysql-bin.000002"), transaction_end=False)


def test_a_failed_commit_that_may_have_landed_keeps_what_it_filled_in_until_it_is_known():
    routed = RoutedSinceEnd()
    first_pass(routed, 10, 40, end=5)
    for landed in (False, True):
        assert routed.missed(at(20), transaction_end=False)
        routed.fill(at(20), "shop.orders")
        routed.aborted(unsettled={"shop.orders"})
        if landed:
            routed.committed("shop.orders")
        else:
            routed.lost("shop.orders")
    assert not routed.missed(at(20), transaction_end=False)


def test_the_replay_skips_exactly_the_first_pass_entries_sent_again_in_its_epoch():
    second = SecondPass(structlog.get_logger())
    second.went_back(at(10), epoch=2, again=2)
    second.new_epoch(2)
    assert not second.first_pass_entry(at(5))  # before where the stream went back
    assert second.first_pass_entry(at(10)) and second.first_pass_entry(at(20))
    assert not second.first_pass_entry(at(30))  # past the two sent again: new entries
    second.went_back(at(10), epoch=3, again=5)
    second.new_epoch(4)  # that replay was rolled back before it ended
    assert not second.first_pass_entry(at(10))


@pytest.mark.parametrize("keeps_every_change", [True, False])
def test_a_missed_entry_is_applied_behind_a_commit_and_an_upsert_applies_again_through_it(keeps_every_change):
    second = SecondPass(structlog.get_logger())
    done = at(100)
    assert not second.applies_again("db.t", keeps_every_change, at(50), done, missed=False)
    assert second.applies_again("db.t", keeps_every_change, at(40), done, missed=True)
    # An upsert table applies everything after the missed entry again, in order, so the last
    # change per key wins again; a changelog only lacks the missed change.
    assert second.applies_again("db.t", keeps_every_change, at(60), done, missed=False) is not keeps_every_change
    second.committed(at(90), failed=set(), channels={"db.t"})
    # Not yet through what the table held: the upsert goes on applying again.
    assert second.applies_again("db.t", keeps_every_change, at(95), done, missed=False) is not keeps_every_change
    second.committed(at(100), failed=set(), channels={"db.t"})
    assert not second.applies_again("db.t", keeps_every_change, at(100), done, missed=False)
    assert second.filled_in == 1


def test_a_refill_an_earlier_process_stopped_in_goes_on_from_what_the_target_says():
    second = SecondPass(structlog.get_logger())
    held = frozenset({("mysql-bin.000001", 60)})
    second.resume("db.log", Refill(at(50), at(100), held))  # a changelog: the changes it lacks in (50, 100]
    second.resume("db.t", Refill(at(50), at(100), None))  # an upsert: everything through 100, again
    assert not second.applies_again("db.log", True, at(50), at(100), missed=False)
    assert not second.applies_again("db.log", True, at(60), at(100), missed=False)  # held
    assert second.applies_again("db.log", True, at(70), at(100), missed=False)
    assert second.applies_again("db.t", False, at(40), at(100), missed=False)
    second.committed(at(80), failed=set(), channels={"db.log", "db.t"})
    assert not second.applies_again("db.log", True, at(70), at(100), missed=False)  # committed since
    assert second.applies_again("db.log", True, at(90), at(100), missed=False)
    second.committed(at(100), failed=set(), channels={"db.log", "db.t"})
    assert not second.applies_again("db.log", True, at(90), at(100), missed=False)
    assert not second.applies_again("db.t", False, at(90), at(100), missed=False)
    assert second.filled_in == 2  # (an upsert applying again fills nothing in)
