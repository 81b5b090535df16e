"""Where a Kafka-mode job starts reading each partition of Canal's topic.

The group's committed offset, or the offset every channel's target already
holds when that is further (the offset commit after an Iceberg commit can
be lost). A partition with neither starts where ``start_from`` says, or at
its beginning when the job ran before (a target holds a Kafka position:
replays are skipped, nothing is jumped over), when rules may have targets
not met yet, or when the topic gained the partition while the job ran.
Thread-free and free of I/O: :class:`~canalbridge.sync.source.kafka.link.KafkaLink`
reads the offsets and seeks.
"""

from __future__ import annotations

from collections.abc import Sequence

from canalbridge.sync.errors import KafkaSourceError
from canalbridge.sync.model.position import KafkaPosition
from canalbridge.sync.model.tracking import CommittedPositions


def held_by_targets(committed: CommittedPositions, sources: Sequence[str], lane: str, *, rules: bool) -> int | None:
    """The offset every channel's target holds ``lane`` through (None if one holds nothing of it, or if rules
    may have targets not met yet)."""
    if rules:
        return None
    offsets = []
    for source in sources:
        position = committed.get(source)
        mark = position.mark_in(lane) if isinstance(position, KafkaPosition) else None
        if mark is None:
            return None
        offsets.append(mark.resume)
    return min(offsets) if offsets else None


def ran_before(committed: CommittedPositions, sources: Sequence[str]) -> bool:
    """Whether a channel's target holds a Kafka position: the job read this topic before."""
    return any(isinstance(committed.get(source), KafkaPosition) for source in sources)


def from_beginning(start_from: str, *, rules: bool, added: bool, ran_before: bool) -> bool:
    """Whether a partition neither the group nor the targets know is read from its beginning: as
    ``start_from`` says, or whatever it says when the job read the topic before (replays are skipped rather
    than records jumped over), when a rule's next table may hold nothing yet (the job cannot tell before it
    reads), or when the topic gained the partition while the job ran (its records came after the start)."""
    return start_from == "earliest" or rules or added or ran_before


def start_offset(source: str, partition: int, group: int | None, held: int | None, beginning: int, end: int, *,
                 earliest: bool) -> int:
    """The offset to read ``partition`` from: the further of the ``group``'s and the one the targets ``held``;
    with neither, ``beginning`` if ``earliest`` else ``end``.

    Raises :class:`KafkaSourceError` (``source`` names the topic) when the
    topic's retention deleted records the job has not read.
    """
    known = [offset for offset in (group, held) if offset is not None]
    if not known:
        return beginning if earliest else end
    start = max(known)
    if start < beginning:
        raise KafkaSourceError(
            source, f"partition {partition}: the job resumes at offset {start}, but the topic keeps records only from "
                    f"offset {beginning} on (retention deleted what the job has not read)", transient=False)
    return start
