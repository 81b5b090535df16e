"""What a link to a source offers, whichever it is: Canal over TCP (CanalLink) or Canal's Kafka topic (KafkaLink).

A link owns the conversation with its source on the Receiver's thread
(:class:`ReceiverSide`) and hands the Consumer batches through a bounded
queue (:class:`ConsumerSide`, :mod:`canalbridge.sync.source.handoff`). Each batch belongs to an
*epoch*: a rollback or a reconnect starts a new one and voids every batch
handed out before it. The Consumer asks for acks, oldest batch first, once
every channel committed through a cut; the link sends them from its own
thread and records in :attr:`SourceLink.acks` what the source confirmed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from canalbridge.canal import CanalBatch
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.record import PartitionRecord
from canalbridge.sync.model.tracking import AckState, CommittedPositions
from canalbridge.sync.settings import JobSettings


@dataclass(frozen=True)
class Outstanding:
    """What the Consumer took from its source and has not asked to ack: what keeps Canal's store full.

    ``bytes`` is serialized entry bytes (with a few bytes of framing each:
    :class:`canalbridge.canal.batch.CanalBatch`), close to the measure Canal's
    store counts in MEMSIZE mode (an event's raw length is its serialized Entry).
    """

    entries: int
    bytes: int

    def less(self, other: Outstanding) -> Outstanding:
        """What is left of this once ``other`` (held at an earlier moment) is acked."""
        return Outstanding(max(self.entries - other.entries, 0), max(self.bytes - other.bytes, 0))


@dataclass(frozen=True)
class TakenBatch:
    """A batch as the Consumer gets it: its entries, the epoch it belongs to, and its id in the link.

    ``positions`` gives each entry's position when the entries do not carry
    it (Kafka); None means each entry's header holds its binlog position.
    """

    batch: CanalBatch
    epoch: int
    batch_id: int
    positions: Sequence[Position] | None = None


class ConsumerSide(Protocol):
    """What the Consumer asks of a link. None of these calls blocks on the network."""

    #: whether one epoch's stream can go back to send entries again (Canal's TCP stream after its
    #: parser reconnected to MySQL; see the Consumer and second_pass)
    resends_in_stream: bool
    #: whether the entries carry transaction ends, so that commits can keep source transactions whole
    marks_transactions: bool

    @property
    def store_get_size(self) -> int | None:
        """The most one get asks of the source's store, in the store's unit (entries, or Canal's memunits);
        None: the source holds no store that un-acked entries fill (Kafka)."""
        ...

    @property
    def epoch(self) -> int: ...

    def is_current(self, epoch: int) -> bool:
        """Whether ``epoch`` is the link's and no rollback is pending."""
        ...

    def take(self, timeout_s: float) -> TakenBatch | None:
        """The oldest batch not yet taken, or None after ``timeout_s`` or once the link is closed."""
        ...

    def supersede(self, epoch: int, batch_id: int, counts_through: Position | None) -> None:
        """Only the batch's entries through ``counts_through`` hold back its ack (entries sent again later)."""
        ...

    def ack_through(self, epoch: int, cut: Position | None) -> int:
        """Ask to ack every taken batch of ``epoch`` whose entries lie at or before ``cut``; how many."""
        ...

    def rollback(self) -> int:
        """Void every batch handed out and go back to what was acked; the new epoch."""
        ...

    @property
    def outstanding(self) -> Outstanding:
        """What was taken and not yet asked to be acked (what keeps Canal's store full)."""
        ...


class ReceiverSide(Protocol):
    """What the Receiver drives. Only its thread calls these."""

    #: how logs and errors name the source (never with credentials)
    description: str
    #: what a failed conversation raises: the Receiver reconnects (with back-off) when one is transient
    connection_errors: tuple[type[Exception], ...]

    @property
    def connected(self) -> bool: ...

    def open(self) -> None:
        """(Re)connect; everything handed out before is void, and the source goes back to what was acked."""
        ...

    def disconnect(self) -> None: ...

    def wait_for_room(self, timeout_s: float) -> bool:
        """Wait until the hand-off can take one more batch (or the link is closed)."""
        ...

    def exchange(self) -> object:
        """Send due acks (and a rollback), then one read; what was read (falsy: nothing)."""
        ...


class SourceLink(ConsumerSide, ReceiverSide, Protocol):
    """A whole link, as the job's run holds it: both sides, where acks land, and closing."""

    acks: AckState

    def close(self) -> None:
        """Wake every waiter for good and drop the connection."""
        ...

    def snapshot_refusal(self) -> str | None:
        """Why a snapshot cannot start over this source now (None: it can)."""
        ...

    def partitions(self) -> tuple[PartitionRecord, ...]:
        """Each partition's offsets, for status and metrics (none for a source without partitions)."""
        ...


@dataclass(frozen=True)
class LinkSetup:
    """What a job's run gives the link it opens to its source."""

    job: JobSettings
    acks: AckState  # where the link records the acks the source confirmed
    committed: CommittedPositions  # each channel's last committed position (where a Kafka partition starts)
    snapshotting: Callable[[], bool]  # whether the run's snapshot (or a verify) is left to do
