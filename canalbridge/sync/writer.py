"""The writer interface a channel commits through.

A writer applies one channel's transactions to one target table:
``begin()``, any number of ``send(batch)`` (or, for a writer that
decodes Canal's RowChange bytes itself, ``send_raw(batch)``) while the transaction is
open, then ``seal()`` and the sealed transaction's ``apply(end_position, label)``
(atomically, with the position and label stored alongside the data), or ``abort(reason)``.
A channel commit that holds rows of several column layouts (shards of a
merged target on either side of an ALTER) is sealed and applied in parts:
each but the last is applied with ``publish=False`` and stays out of
readers' sight until the last one lands, with all of them, in one step.
Sealing is what lets commits overlap reading: once a transaction is sealed
the next one may begin and stage rows on one thread while the sealed one is
applied on another. Sealed transactions are applied one at a time, in the
order they were sealed, by the thread that also reads positions and runs
maintenance. ``committed_position()`` reads the position of the last commit
back from the target, so a restarted channel resumes exactly where its table
stands. ``maintain(settings)`` compacts the target and expires old
snapshots, keeping the one that carries the position; the channel calls it
between two applies, never during one. ``alter(alteration, stamp, label)`` applies
a DDL's column changes to the target, stamped with ``stamp`` in the same
atomic step, on the same thread and also between two applies: the channel
applies the rows before a DDL, then the DDL, then the rows after it. The Spark/Iceberg writer in
``spark_sink`` implements the same protocol; the dev kit has an in-memory one.
"""

from __future__ import annotations

from typing import Protocol

from canalbridge.sync.changes import Alteration, BeforeImages, RawBatch, RowBatch
from canalbridge.sync.maintenance import MaintenanceReport
from canalbridge.sync.position import Position
from canalbridge.sync.settings import MaintenanceSettings


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
        ``behind`` (stored with the stamp, read by :meth:`ChannelWriter.committed_refill`)
        is where the write really reached, short of ``end_position``: a commit
        that fills in what Canal's first pass missed, behind the table's position.
        """

    def discard(self, reason: str) -> None:
        """Drop the staged rows without applying them."""


class ChannelWriter(Protocol):
    """What a channel needs from its target."""

    def target_columns(self) -> tuple[str, ...] | None:
        """The target's columns in order, or None when the target will be created from the source."""

    def before_images(self) -> BeforeImages:
        """How much of the old row images this target needs."""

    def committed_position(self) -> Position | None:
        """Position of the last committed transaction, read back from the target."""

    def committed_label(self) -> str | None:
        """The label of the apply whose commit carries :meth:`committed_position` (None: none does)."""

    def committed_refill(self) -> Position | None:
        """``behind`` of the apply that carries :meth:`committed_position` (None if it had none): a refill of
        what Canal's first pass missed stopped there, and a restart must go on with it."""

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        """(binlog file, offset) of every change a changelog target holds in ``(after, through]``."""

    def forget_position(self) -> None:
        """From now on :meth:`committed_position` reads nothing committed before this call
        (``canalbridge reset``): what the source sends next is applied whatever the target holds."""

    def layout_note(self) -> str | None:
        """Why the target's layout makes commits slower than they need be (for status), or None."""

    def begin(self) -> None:
        """Open a transaction."""

    def send(self, batch: RowBatch) -> None:
        """Stage rows of the open transaction."""

    def decodes_row_changes(self) -> bool:
        """Whether this writer takes RowChange bytes (:meth:`send_raw`) and decodes them itself."""

    def send_raw(self, batch: RawBatch) -> None:
        """Stage undecoded row changes of the open transaction (only if :meth:`decodes_row_changes`).

        A RowChange whose columns are not ``batch.columns`` fails the commit with
        :class:`~canalbridge.sync.errors.ColumnsChangedError`.
        """

    def seal(self) -> SealedTransaction:
        """Close the open transaction for applying; the writer is then ready for the next ``begin``."""

    def abort(self, reason: str) -> None:
        """Drop everything the open transaction staged."""

    def maintain(self, settings: MaintenanceSettings) -> MaintenanceReport:
        """Compact the target and expire snapshots older than ``keep_snapshots_hours``, never the one
        that carries the committed position; raise on failure."""

    def column_aliases(self) -> dict[str, str]:
        """A shared target's (shards merged): the source column names one shard's rename took from the
        target (lower case) -> the target column they went to; empty for any other target."""

    def source_table(self) -> str | None:
        """The name (``schema.table``) the target's source table has now, if the channel followed it through
        a ``RENAME TABLE`` (:meth:`alter` records it); None if it was never renamed."""

    def alter(self, alteration: Alteration, stamp: Position, label: str) -> None:
        """Apply a DDL's column changes to the target, with ``stamp`` as its position and ``label`` as its
        label, in one atomic step (never while an apply is held: the channel publishes the rows before a
        DDL first).

        Raise :class:`~canalbridge.sync.errors.SchemaChangeError` for a change
        the target cannot follow; a column the target already has as the DDL
        leaves it is no error.
        """
