"""What a channel needs from its target, split by concern (as Flink CDC splits a data sink).

A :class:`ChannelSink` is four parts, each used by the thread that needs it:

- a :class:`TargetReader`: the target's state for this job (its columns,
  the stamp of the last commit, a shared target's column aliases, a
  followed table's current name, the snapshot's progress) read back as one :class:`TargetState`,
  at the channel's start, after an abort (the staging thread maps the
  replay onto the target as it is) and when a commit's outcome is unknown;
- a :class:`TransactionWriter`: ``begin()``, any number of ``send(batch)``
  (or, for a writer that decodes Canal's RowChange bytes itself,
  ``send_raw(batch)``) and ``send_chunk(batch)`` (a snapshot's chunk), then ``seal()``, and the sealed transaction's
  ``apply(end_position, label)``, atomic with the position and label stored
  alongside the data, or ``abort(reason)``. Sealing lets commits overlap
  reading: the next transaction stages on the staging thread while the
  sealed one is applied on the committer thread. A channel commit that
  holds rows of several column layouts (shards of a merged target on either
  side of an ALTER) is applied in parts: each but the last with
  ``publish=False``, out of readers' sight until the last one lands with
  all of them, in one step;
- in a job whose cuts are atomic (``[job.cuts] atomic``), a sealed
  transaction is staged instead (``stage(end_position, label)``): written
  and stamped like an apply, but left out of main, for the job's
  :class:`CatalogPublisher` to make current with every other channel's
  staged write in one catalog commit;
- a :class:`SchemaApplier`: a DDL's step as the sync core computed it
  (:class:`~canalbridge.sync.model.changes.Alteration`: its column changes, a
  shared target's aliases after it, a followed rename's new name), applied
  and stamped in one atomic step, between two applies;
- a :class:`Maintainer`: compaction and snapshot expiry, between two applies.

The Spark/Iceberg sink in ``spark_sink`` gives the four parts as objects of
their own over one table; the in-memory writer of the tests is all four at
once (:meth:`ChannelSink.of`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from canalbridge.sync.channel.maintenance import MaintenanceReport
from canalbridge.sync.model.changes import Alteration, BeforeImages, ChunkBatch, RawBatch, RowBatch
from canalbridge.sync.model.position import Position
from canalbridge.sync.settings import MaintenanceSettings
from canalbridge.sync.snapshot.progress import TableProgress


@dataclass(frozen=True)
class TargetState:
    """What the target holds for one job, as one read found it."""

    columns: tuple[str, ...] | None = None  # in order; None: the target will be created from the source
    position: Position | None = None  # of the last committed transaction
    label: str | None = None  # of the apply whose commit carries ``position``
    # ``behind`` of that apply: a refill of what Canal's first pass missed stopped there (see position.Refill).
    refill: Position | None = None
    # A shared target's (shards merged): the source column names one shard's rename took from the target
    # (lower case) -> the target column they went to.
    aliases: Mapping[str, str] = field(default_factory=dict)
    source_table: str | None = None  # ``schema.table``, if the channel followed its source through a RENAME
    # How far the snapshot of each source table (``schema.table``) came, as the last commit stamped it.
    snapshot: Mapping[str, TableProgress] = field(default_factory=dict)
    # ``canalbridge rebuild`` marked the target to be made anew, and no commit of the job landed since: the
    # columns are then None (the channel maps rows as for a new target) and the position too.
    rebuild: bool = False


class TargetReader(Protocol):
    """The target's state, read back (a restarted channel resumes exactly where its table stands)."""

    def read_state(self) -> TargetState:
        """The target's columns, last stamp, aliases and source table, read together."""

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        """(binlog file, offset) of every change a changelog target holds in ``(after, through]``."""

    def forget_position(self) -> None:
        """From now on :meth:`read_state` finds no position committed before this call (``canalbridge
        reset``): what the source sends next is applied whatever the target holds."""

    def mark_rebuild(self) -> bool:
        """Mark the target to be made anew (``canalbridge rebuild``): from now on :meth:`read_state` finds no
        position and says ``rebuild``, until a commit of the job lands; the first apply then replaces the
        table with one of the rows' columns and key. False if the target does not exist."""


class SealedTransaction(Protocol):
    """A transaction whose rows are all staged, waiting to be applied to the target."""

    def apply(self, end_position: Position, label: str, *, publish: bool = True,
              behind: Position | None = None) -> None:
        """Apply everything staged as one atomic write stamped with ``end_position`` and ``label``; raise on
        failure.

        With ``publish`` False the write is held where readers of the target
        do not see it, and the writer's next apply goes on from it: the apply
        that publishes makes every held write visible at once (one step, so a
        crash leaves all or none). A failed apply drops what was held. The
        staged rows are dropped either way: a failed transaction is replayed from Canal.
        ``behind`` (stored with the stamp, read back as :attr:`TargetState.refill`)
        is where the write really reached, short of ``end_position``: a commit
        that fills in what Canal's first pass missed, behind the table's position.
        """

    def stage(self, end_position: Position, label: str, *, behind: Position | None = None) -> StagedWrite | None:
        """Write everything staged as :meth:`apply` would, stamped alike, but leave it out of readers' sight
        until the job's :class:`CatalogPublisher` publishes it with the other channels' staged writes. None:
        this transaction cannot be staged (the writer says why in its log), so it was applied at once instead.
        """

    def discard(self, reason: str) -> None:
        """Drop the staged rows without applying them."""


class StagedWrite(Protocol):
    """One target's staged write: written, stamped, not yet current."""

    @property
    def target(self) -> str:
        """The target it is for."""

    def discard(self) -> None:
        """Delete what staging wrote; only for a write known not to have become current. Best effort: it
        never raises (what it cannot delete stays as orphan files)."""


class CatalogPublisher(Protocol):
    """Makes several targets' staged writes current in one catalog commit: all of them or none."""

    def publish(self, staged: Sequence[StagedWrite]) -> None:
        """Publish ``staged``; raise :class:`~canalbridge.sync.errors.PublishFailed` if the catalog did not
        report success (``refused``: it applied none)."""


class TransactionWriter(Protocol):
    """Stages a channel's transactions and seals them for applying."""

    def before_images(self) -> BeforeImages:
        """How much of the old row images this target needs."""

    def decodes_row_changes(self) -> bool:
        """Whether this writer takes RowChange bytes (:meth:`send_raw`) and decodes them itself."""

    def begin(self) -> None:
        """Open a transaction."""

    def send(self, batch: RowBatch) -> None:
        """Stage rows of the open transaction."""

    def send_raw(self, batch: RawBatch) -> None:
        """Stage undecoded row changes of the open transaction (only if :meth:`decodes_row_changes`).

        A RowChange whose columns are not ``batch.columns`` fails the commit with
        :class:`~canalbridge.sync.errors.ColumnsChangedError`.
        """

    def send_chunk(self, batch: ChunkBatch) -> None:
        """Stage a snapshot chunk of the open transaction, after the rows sent before it and before those sent
        after it; its apply stamps ``batch.progress`` (read back as :attr:`TargetState.snapshot`), and every
        later stamp keeps it."""

    def seal(self) -> SealedTransaction:
        """Close the open transaction for applying; the writer is then ready for the next ``begin``."""

    def abort(self, reason: str) -> None:
        """Drop everything the open transaction staged."""

    def layout_note(self) -> str | None:
        """Why the target's layout makes commits slower than they need be (for status), or None."""


class SchemaApplier(Protocol):
    """Applies the schema steps the channel computed."""

    def alter(self, alteration: Alteration, stamp: Position, label: str) -> None:
        """Apply a DDL's step to the target, with ``stamp`` as its position and ``label`` as its label, in
        one atomic step (never while an apply is held: the channel publishes the rows before a DDL first).

        Raise :class:`~canalbridge.sync.errors.SchemaChangeError` for a change
        the target cannot follow; a column the target already has as the DDL
        leaves it is no error.
        """


class Maintainer(Protocol):
    """Keeps the target's files and snapshots in check."""

    def maintain(self, settings: MaintenanceSettings) -> MaintenanceReport:
        """Compact the target and expire snapshots older than ``keep_snapshots_hours``, never the one
        that carries the committed position; raise on failure."""


class WholeTarget(TargetReader, TransactionWriter, SchemaApplier, Maintainer, Protocol):
    """One object that is all four parts."""


@dataclass(frozen=True)
class ChannelSink:
    """A channel's target: the four parts the channel's threads use."""

    state: TargetReader
    writer: TransactionWriter
    schema: SchemaApplier
    maintainer: Maintainer

    @classmethod
    def of(cls, target: WholeTarget) -> ChannelSink:
        """The sink of an object that is all four parts."""
        return cls(target, target, target, target)
