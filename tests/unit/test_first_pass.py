"""Entries Canal's first pass missed are told apart from entries it sends again."""

from __future__ import annotations

from canalbridge.sync.first_pass import RoutedSinceEnd
from canalbridge.sync.position import EntryPosition


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
