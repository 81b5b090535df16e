"""Who gets each entry the Consumer routes: its table's channel, unless that channel holds it already.

:class:`Delivery` gives a ROWDATA entry (rows, or a statement such as a
DDL) to the channel the router names for its table
(:mod:`canalbridge.sync.routing.router`), and skips what that channel committed,
except what Canal's second pass must fill in behind a commit
(:mod:`canalbridge.sync.consumer.second_pass`). The Consumer owns the second pass
(it tells it what the stream and each commit did); Delivery asks it, entry
by entry, and records what it filled in. The Consumer tells Delivery what
became of each commit, so that followed renames go on from what landed.

While a snapshot runs (:mod:`canalbridge.sync.snapshot`), the rows of its
signal table go to no channel: they open and close chunk windows, and a
closed window's chunk goes to its table's channel at the close signal's
position. Changes of a table whose window is open are noted in it; a DDL
on it spoils the window (the snapshot reads that chunk again), and so
does a RENAME or DROP of it, which also tells the snapshot the name a
followed table goes by now, or that the table is gone. A window that
closes with no channel to take its table is given up (the snapshot reads
the table again as it is then), and so is a window replayed after its
chunk's rows were lost (a Spark JVM or executor that died with them).

A channel whose target waits to be made anew (``canalbridge rebuild``) gets
none of its table's entries until its rebuild window's close signal: the
target is made anew there, and the snapshot that follows reads every row
written before it. An abort opens the window again, and its replay drops
the same entries again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog
from google.protobuf.message import DecodeError

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.consumer.second_pass import SecondPass
from canalbridge.sync.errors import EntryDecodeError, KeyColumnMissing, RowMappingError
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.stats import ConsumerStats
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.model.tracking import CommittedPositions
from canalbridge.sync.routing.router import ERASE as _ERASE
from canalbridge.sync.routing.router import RENAME as _RENAME
from canalbridge.sync.routing.router import TableRouter, dropped_tables, renamed_tables
from canalbridge.sync.schema.rows import DML_EVENTS, is_ddl, rows_count
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.snapshot.chunk_window import WindowState
from canalbridge.sync.snapshot.windows import Windows


class Delivery:
    """Routes entries to channels and gives each what it does not hold yet. Used by the Consumer thread only."""

    def __init__(self, settings: JobSettings, channels: Sequence[Channel], committed: CommittedPositions,
                 open_channel: Callable[[ChannelSettings], Channel] | None, second: SecondPass, stats: ConsumerStats,
                 log: structlog.typing.FilteringBoundLogger, windows: Windows | None = None) -> None:
        self._second = second
        self._windows = windows
        # The signal table's rows go to no channel, whatever rule would take its schema (heartbeats come in
        # every snapshot mode; a window's signals only while windows exist).
        self._signal_key = settings.snapshot.signal.key if settings.snapshot is not None else None
        self._label = ""  # of the open transaction
        self._router = TableRouter(settings, channels, open_channel, self._opened, log)
        self.channels = self._router.channels
        self._committed = committed
        self._stats = stats
        self._log = log
        for channel in self.channels.values():
            self._opened(channel)

    def begin(self, label: str) -> None:
        """A transaction begins on every channel."""
        self._label = label
        self._router.begin(label)

    def rows(self, table: TableId, position: Position, entry: entry_pb.Entry, missed: bool) -> None:
        """A row change of ``table`` (schema, table) at ``position``; ``missed``: Canal's first pass missed it."""
        windows = self._windows
        if windows is not None and windows.concerns(table):
            try:
                change = entry_pb.RowChange.FromString(entry.storeValue)
            except DecodeError as exc:
                raise EntryDecodeError(".".join(table), str(exc), position) from exc
            if windows.is_signal(table):
                self._signals(windows, change, position, missed)
                return
            try:
                windows.note(table, change)
            except KeyColumnMissing as exc:
                raise RowMappingError(".".join(table), f"{exc}: a snapshot needs whole row images "
                                      f"(binlog_row_image=FULL)", position) from None
        if table.key == self._signal_key:
            return  # a heartbeat, or a signal of no window
        channel = self._router.channel_for(table)
        if self._give(channel, position, entry, missed, table):
            self._stats.rows_routed += 1
        elif channel is not None:
            self._stats.skipped += 1

    def lane_channel(self, table: TableId, position: Position) -> Channel | bool | None:
        """For a fast lane (:mod:`canalbridge.sync.consumer.lane`): the channel that takes ``table``'s row changes
        from ``position`` on as they come, None if no channel takes them, False if they need :meth:`rows`
        (a window open on the table, the signal table, a rebuild waiting, a channel that holds them already)."""
        windows = self._windows
        if (windows is not None and windows.concerns(table)) or table.key == self._signal_key:
            return False
        channel = self._router.channel_for(table)
        if channel is None:
            return None
        if channel.rebuild_pending:
            return False
        done = self._committed.get(channel.source)
        return channel if done is None or position > done else False

    def statement(self, table: TableId, position: Position, entry: entry_pb.Entry, missed: bool) -> Channel | None:
        """A statement on ``table`` (a DDL, the SQL that annotates rows): given to the table's channel, which
        applies what a DDL changes (and names it if a later row no longer fits); a followed rename to the
        channel of the old name. The channel of ``table``, if any."""
        windows = self._windows
        if windows is not None and windows.concerns(table) and is_ddl(entry.storeValue):
            windows.spoil(table)  # the chunk in flight may have been read on either side of it: read again
        channel = self._router.channel_for(table)
        event_type = entry.header.eventType
        given = self._router.ddl_owners(entry, event_type, channel, table)
        for owner, named in given:
            self._give(owner, position, entry, missed, named)
        if windows is not None and event_type == _RENAME:
            # (Canal's header names the new table: the old name's window is spoiled by name.) A rename the
            # router followed gave that channel the entry under the old name.
            followed = {named for owner, named in given if owner is not None}
            for old, new in renamed_tables(entry):
                windows.moved(old, new if old in followed else None)
        elif windows is not None and event_type == _ERASE:
            for dropped in dropped_tables(entry):
                windows.moved(dropped, None)
        return given[0][0]

    def landed(self, label: str, failed: set[str]) -> None:
        """The commit of transaction ``label`` ended: it landed, except on the channels ``failed``."""
        self._router.committed(label, failed)
        if self._windows is not None:
            self._windows.landed(label, failed)

    def aborted(self) -> None:
        """The open transaction was dropped: what it routed is routed again in the replay."""
        self._router.aborted()
        if self._windows is not None:
            self._windows.aborted()

    def _signals(self, windows: Windows, change: entry_pb.RowChange, position: Position, missed: bool) -> None:
        """A change of the signal table: each chunk whose window it closes goes to its table's channel here."""
        if missed:
            self._second.fill(position, None)  # nothing of a signal is applied as it stands
        for window in windows.signal(change, self._label):
            channel = self._router.channel_for(window.table)
            if channel is None:  # (renamed away, or its channel gone: the snapshot reads it again as it is now)
                windows.given_up(window)
                self._log.warning("consumer.chunk_orphaned", table=window.source, window=window.id)
                continue
            done = self._committed.get(channel.source)
            if done is not None and position <= done:
                windows.held_already(window)  # a commit that reported failure landed with it
                self._log.info("consumer.chunk_held_already", table=window.source, window=window.id)
            elif window.lost:  # (its rows went with a Spark JVM: read again, not added again)
                windows.given_up(window)
            else:
                window.channel = channel.source  # (what lands with that channel's commit)
                if window.replaces:
                    channel.rebuild_window = window  # (the table's entries reach the channel from here on)
                channel.add_chunk(position, window)
                self._stats.chunks_routed += 1

    def _opened(self, channel: Channel) -> None:
        """A channel opened: a refill its target says an earlier process stopped in goes on."""
        if channel.refill is not None:
            self._second.resume(channel.source, channel.refill)

    def _give(self, channel: Channel | None, position: Position, entry: entry_pb.Entry, missed: bool,
              table: TableId) -> bool:
        """Give an entry of ``table`` to its channel unless the channel has committed it; True if given."""
        if channel is None:
            if missed:
                self._second.fill(position, None)  # a table no channel syncs
            return False
        if channel.rebuild_pending and not _rebuilt(channel):
            if missed:
                self._second.fill(position, None)  # the snapshot after the rebuild's mark reads it
            return False
        done = self._committed.get(channel.source)
        if done is None or position > done or self._applies_again(channel, position, done, missed):
            header = entry.header
            dml = header.eventType in DML_EVENTS
            channel.add(position, entry.storeValue, dml=dml, rows=rows_count(header) if dml else 0, table=table)
            if missed:
                self._second.fill(position, channel.source)
            return True
        return False

    def _applies_again(self, channel: Channel, position: Position, done: Position, missed: bool) -> bool:
        """Whether an entry at or before what ``channel`` committed must be applied (again)."""
        again = self._second.applies_again(channel.source, channel.settings.keeps_every_change, position, done,
                                          missed)
        self._stats.filled_in = self._second.filled_in
        return again


def _rebuilt(channel: Channel) -> bool:
    """Whether ``channel``'s rebuild window closed in the stream (its target is made anew there); once that
    transaction landed, the channel is no longer waiting for it."""
    window = channel.rebuild_window
    if window is None or window.state not in (WindowState.CLOSED, WindowState.LANDED):
        return False
    if window.state is WindowState.LANDED:
        channel.rebuild_pending, channel.rebuild_window = False, None
    return True
