"""Where a Kafka-mode job starts each partition: the group's offset, the targets', or start_from."""

from __future__ import annotations

import pytest

from canalbridge.sync.errors import KafkaSourceError
from canalbridge.sync.model.position import EntryPosition, KafkaPosition, LaneMark
from canalbridge.sync.model.tracking import CommittedPositions
from canalbridge.sync.source.kafka.start import from_beginning, held_by_targets, ran_before, start_offset


def committed(**positions) -> CommittedPositions:
    held = CommittedPositions()
    for source, position in positions.items():
        held.advance(source, position)
    return held


def at(resume: int, *, lane: str = "t:0", other: dict[str, int] | None = None) -> KafkaPosition:
    lanes = {name: LaneMark("mysql-bin.000001", 4, 0, offset) for name, offset in (other or {}).items()}
    return KafkaPosition("mysql-bin.000001", 4, lane=lane, resume=resume, lanes=lanes)


def test_the_targets_hold_a_lane_through_the_least_any_of_them_holds():
    held = committed(a=at(12), b=at(30, lane="t:1", other={"t:0": 9}))
    assert held_by_targets(held, ["a", "b"], "t:0", rules=False) == 9
    assert held_by_targets(held, ["a", "b"], "t:1", rules=False) is None  # a holds nothing of t:1
    assert held_by_targets(held, ["a", "b"], "t:0", rules=True) is None  # a rule's next table may hold nothing


def test_a_target_written_through_canal_tcp_holds_no_lane_and_did_not_read_the_topic():
    held = committed(a=EntryPosition("mysql-bin.000001", 4))
    assert held_by_targets(held, ["a"], "t:0", rules=False) is None
    assert not ran_before(held, ["a"])
    assert ran_before(committed(a=EntryPosition("mysql-bin.000001", 4), b=at(3)), ["a", "b"])


@pytest.mark.parametrize(("group", "held", "expected"), [(40, None, 40), (None, 55, 55), (40, 55, 55), (60, 55, 60)])
def test_a_partition_starts_at_the_further_of_the_groups_offset_and_the_targets(group, held, expected):
    assert start_offset("topic t", 0, group, held, 10, 100, earliest=False) == expected


@pytest.mark.parametrize(("earliest", "expected"), [(True, 10), (False, 100)])
def test_a_partition_neither_knows_starts_where_start_from_says(earliest, expected):
    assert start_offset("topic t", 0, None, None, 10, 100, earliest=earliest) == expected


def test_a_start_that_retention_deleted_pauses_naming_partition_and_offsets():
    with pytest.raises(KafkaSourceError, match="partition 3: the job resumes at offset 7, but the topic keeps records "
                                               "only from offset 10 on") as failure:
        start_offset("topic t", 3, 7, None, 10, 100, earliest=False)
    assert not failure.value.transient


def test_a_partition_nobody_knows_is_read_from_its_beginning_unless_the_job_is_new_and_says_latest():
    assert not from_beginning("latest", rules=False, added=False, ran_before=False)
    assert from_beginning("earliest", rules=False, added=False, ran_before=False)
    assert from_beginning("latest", rules=False, added=False, ran_before=True)  # replays are skipped, none lost
    assert from_beginning("latest", rules=True, added=False, ran_before=False)  # a rule's next table holds nothing
    assert from_beginning("latest", rules=False, added=True, ran_before=False)  # added while the job ran
