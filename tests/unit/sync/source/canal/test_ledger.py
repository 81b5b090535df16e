"""The ledger accepts a batch only with proof that nothing lies between it and the ack cursor."""

from __future__ import annotations

from canalbridge.sync.model.position import EntryPosition, PositionRange
from canalbridge.sync.source.canal.ledger import IDLE_ROLLBACK_POLLS, BatchLedger, Verdict


def span(start: int, end: int) -> PositionRange:
    return PositionRange(EntryPosition("mysql-bin.000001", start), EntryPosition("mysql-bin.000001", end))


def opened(last_seen_id: int | None = None) -> BatchLedger:
    """A ledger on a fresh connection whose rollback was sent."""
    ledger = BatchLedger()
    ledger.last_seen_id = last_seen_id
    ledger.reset(reconnected=True)
    ledger.rolled_back()
    return ledger


def receive(ledger: BatchLedger, batch_id: int, start: int, end: int, epoch: int | None = None):
    return ledger.receive(ledger.epoch if epoch is None else epoch, batch_id, span(start, end), end - start + 1, 100)


def test_consecutive_ids_from_the_last_seen_are_accepted():
    ledger = opened(last_seen_id=4)
    assert receive(ledger, 5, 1, 10)[0] is Verdict.ACCEPTED
    assert receive(ledger, 6, 11, 20)[0] is Verdict.ACCEPTED


def test_a_first_batch_after_an_unseen_id_is_doubted_and_rolls_back():
    # A stale GET took id 5 after our rollback: our first batch is 6.
    ledger = opened(last_seen_id=4)
    epoch = ledger.epoch
    verdict, _ = receive(ledger, 6, 30, 40)
    assert verdict is Verdict.DOUBTED and ledger.rollback_due and ledger.epoch == epoch + 1
    ledger.rolled_back()
    assert receive(ledger, 7, 1, 10)[0] is Verdict.ACCEPTED  # the replay after the rollback


def test_a_gap_inside_an_epoch_is_doubted():
    ledger = opened(last_seen_id=0)
    assert receive(ledger, 1, 1, 10)[0] is Verdict.ACCEPTED
    assert receive(ledger, 3, 21, 30)[0] is Verdict.DOUBTED


def test_a_process_that_has_seen_no_id_trusts_only_id_one():
    assert receive(opened(), 1, 1, 10)[0] is Verdict.ACCEPTED
    assert receive(opened(), 9, 1, 10)[0] is Verdict.DOUBTED


def test_a_restarted_server_starts_again_at_one():
    assert receive(opened(last_seen_id=40), 1, 1, 10)[0] is Verdict.ACCEPTED


def test_a_replay_that_starts_after_the_first_unacked_entry_is_doubted():
    ledger = opened(last_seen_id=0)
    receive(ledger, 1, 1, 10)
    ledger.reset(reconnected=True)  # the connection dropped holding batch 1 (entries 1..10)
    ledger.rolled_back()
    # Id 2 is what was due, but the replay must start at entry 1 or before.
    assert receive(ledger, 2, 11, 20)[0] is Verdict.DOUBTED
    ledger.rolled_back()
    assert receive(ledger, 3, 1, 10)[0] is Verdict.ACCEPTED


def test_a_reply_to_a_get_sent_before_the_rollback_is_stale_but_its_id_counts():
    ledger = opened(last_seen_id=0)
    epoch = ledger.epoch
    ledger.reset(reconnected=False)  # the Consumer rolled back while the GET was on the wire
    assert receive(ledger, 1, 1, 10, epoch=epoch)[0] is Verdict.STALE
    ledger.rolled_back()
    assert receive(ledger, 2, 1, 10)[0] is Verdict.ACCEPTED


def three_taken_batches():
    """Batches 1..3 (entries 1-10, 11-20, 21-30) received and taken by the Consumer."""
    ledger = opened(last_seen_id=0)
    batches = [receive(ledger, batch_id, first, first + 9)[1] for batch_id, first in ((1, 1), (2, 11), (3, 21))]
    for batch in batches:
        ledger.consumed(batch)
    return ledger, batches


def test_acks_cover_taken_batches_wholly_before_the_cut_and_land_with_the_next_reply():
    ledger, (first, second, _) = three_taken_batches()
    assert ledger.outstanding.entries == 30
    assert ledger.ack_through(ledger.epoch, EntryPosition("mysql-bin.000001", 25)) == [first, second]
    assert ledger.outstanding.entries == 10
    sent = ledger.acks_to_send()
    ledger.acks_sent(sent)
    assert ledger.acks_landed() == second.range.end and ledger.acks_landed() is None


def test_a_superseded_batch_is_acked_through_the_entries_that_count():
    # Canal went back in the stream: what batch 2 holds after entry 12 comes again later.
    ledger, (first, second, third) = three_taken_batches()
    ledger.supersede(ledger.epoch, 2, EntryPosition("mysql-bin.000001", 12))
    ledger.supersede(ledger.epoch, 3, None)  # nothing in it counts
    assert ledger.ack_through(ledger.epoch, EntryPosition("mysql-bin.000001", 11)) == [first]
    assert ledger.ack_through(ledger.epoch, EntryPosition("mysql-bin.000001", 12)) == [second, third]
    ledger.acks_sent(ledger.acks_to_send())
    assert ledger.acks_landed() == EntryPosition("mysql-bin.000001", 12)  # not 30: those come again


def test_acks_of_a_rolled_back_epoch_are_never_asked_for():
    ledger = opened(last_seen_id=0)
    _, batch = receive(ledger, 1, 1, 10)
    ledger.consumed(batch)
    epoch = ledger.epoch
    ledger.reset(reconnected=False)
    assert ledger.ack_through(epoch, EntryPosition("mysql-bin.000001", 99)) == []


def reconnected_with_an_unproven_ack():
    """Batch 1 (entries 1..10) was committed and its ack sent; then the connection died unanswered."""
    ledger = opened(last_seen_id=0)
    _, batch = receive(ledger, 1, 1, 10)
    ledger.consumed(batch)
    ledger.ack_through(ledger.epoch, EntryPosition("mysql-bin.000001", 10))
    ledger.acks_sent(ledger.acks_to_send())
    ledger.reset(reconnected=True)
    ledger.rolled_back()
    return ledger, batch


def test_a_replay_that_starts_past_an_unproven_ack_proves_it_landed():
    ledger, batch = reconnected_with_an_unproven_ack()
    assert ledger.acks_landed() is None
    receive(ledger, 2, 11, 20)
    assert ledger.acks_landed() == batch.range.end


def test_a_replay_of_an_unproven_ack_keeps_it_unproven():
    ledger, _ = reconnected_with_an_unproven_ack()
    receive(ledger, 2, 1, 10)  # batch 1 comes again: its ack did not land
    assert ledger.acks_landed() is None


def test_idle_polls_after_a_reconnect_roll_back_while_nothing_is_held():
    ledger = opened(last_seen_id=0)
    for _ in range(IDLE_ROLLBACK_POLLS):
        ledger.idle()
        assert ledger.rollback_due
        ledger.rolled_back()
    ledger.idle()
    assert not ledger.rollback_due  # the window after the reconnect is over


def test_idle_polls_never_roll_back_what_the_consumer_holds():
    ledger = opened(last_seen_id=0)
    receive(ledger, 1, 1, 10)
    ledger.idle()
    assert not ledger.rollback_due
