"""What a Kafka-mode job knows of each partition: copies dropped, gaps and failovers refused, acks in order."""

from __future__ import annotations

import pytest

from canalbridge.canal import CanalBatch
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import KafkaSourceError
from canalbridge.sync.source.kafka.lanes import KafkaLanes

TOPIC = "example"


def record(*offsets: int, journal: str = "mysql-bin.000001") -> CanalBatch:
    """One Kafka record's entries, at these binlog offsets."""
    entries = [entry_pb.Entry(header=entry_pb.Header(logfileName=journal, logfileOffset=offset, executeTime=1))
               for offset in offsets]
    return CanalBatch(0, tuple(entries), 10 * len(entries))


def opened(*partitions: int, flat: bool = False) -> KafkaLanes:
    lanes = KafkaLanes(TOPIC, "kafka example", flat=flat)
    lanes.opened({partition: 0 for partition in partitions})
    return lanes


def deliver(lanes: KafkaLanes, partition: int, *records: tuple[int, CanalBatch], epoch: int = 1):
    """Sift and file one poll of ``partition``; the batch for the Consumer (None: copies only)."""
    sifted = lanes.sift(partition, lanes.lanes[partition].mark, records, lanes.others(partition))
    return sifted, lanes.file(epoch, partition, records[-1][0] + 1, sifted, 10)


def test_entries_a_partition_delivered_before_are_dropped_as_copies_and_acked_with_what_they_copy():
    lanes = opened(0)
    _, first = deliver(lanes, 0, (0, record(100, 200)))
    assert first is not None and [p.offset for p in first.positions] == [100, 200]
    lanes.taken(first.batch_id)
    sifted, again = deliver(lanes, 0, (1, record(100, 200)), (2, record(300)))
    assert sifted.copies == 2 and again is not None and [p.offset for p in again.positions] == [300]
    _, copies_only = deliver(lanes, 0, (3, record(300)))
    assert copies_only is None  # nothing to route
    assert lanes.records()[0].copies_dropped == 3


def test_an_entry_behind_delivered_ones_that_was_never_delivered_is_a_gap():
    lanes = opened(0)
    deliver(lanes, 0, (0, record(100, 300)))
    with pytest.raises(KafkaSourceError, match="without having sent it before"):
        deliver(lanes, 0, (1, record(200)))


def test_an_entry_of_another_binlog_pauses_rather_than_guess():
    lanes = opened(0)
    deliver(lanes, 0, (0, record(100)))
    with pytest.raises(KafkaSourceError, match="failed over"):
        deliver(lanes, 0, (1, record(4, journal="other-bin.000001")))


def test_offsets_are_committed_oldest_first_through_taken_chunks_at_or_before_the_cut():
    lanes = opened(0, 1)
    _, a = deliver(lanes, 0, (0, record(100)))
    _, b = deliver(lanes, 1, (0, record(200)))
    _, c = deliver(lanes, 0, (1, record(300)))
    assert a is not None and b is not None and c is not None
    lanes.taken(a.batch_id)
    assert lanes.ack_through(c.positions[-1]) == 1  # b is not taken yet: nothing after it goes
    assert lanes.to_commit[-1] == ({0: 1}, c.positions[-1])
    lanes.taken(b.batch_id)
    lanes.taken(c.batch_id)
    assert lanes.ack_through(b.positions[-1]) == 1  # c lies past that cut
    assert lanes.ack_through(c.positions[-1]) == 1
    assert lanes.seeks() == {0: 2, 1: 1}


def test_a_start_the_targets_hold_ahead_of_the_group_is_committed_first():
    lanes = KafkaLanes(TOPIC, "kafka example", flat=False)
    lanes.lane(0).committed = 5
    lanes.lane(1).committed = 9
    lanes.opened({0: 7, 1: 9})
    assert lanes.to_commit == [({0: 7}, None)]


def test_after_a_rollback_the_lane_reads_again_from_what_was_acked_and_drops_copies_of_it():
    lanes = opened(0)
    _, a = deliver(lanes, 0, (0, record(100)))
    assert a is not None
    lanes.taken(a.batch_id)
    lanes.ack_through(a.positions[-1])
    deliver(lanes, 0, (1, record(200)))  # read, not acked: a rollback voids it
    lanes.reset()
    lanes.rolled_back()
    assert lanes.seeks() == {0: 1}
    sifted, again = deliver(lanes, 0, (1, record(200)), epoch=2)
    assert sifted.copies == 0 and again is not None  # not acked: delivered again


def test_flat_messages_order_each_lane_by_offset():
    lanes = opened(0, flat=True)
    _, batch = deliver(lanes, 0, (0, record(0, 0)), (1, record(0)))
    assert batch is not None
    assert [(p.journal, p.offset, p.occurrence, p.resume) for p in batch.positions] == [
        (f"{TOPIC}:0", 0, 0, 0), (f"{TOPIC}:0", 0, 1, 1), (f"{TOPIC}:0", 1, 0, 2)]
