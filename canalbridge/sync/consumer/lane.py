"""The Consumer's fast lane: the plain stretches of a batch, routed as columns instead of entry by entry.

Most of a stream needs none of the checks the Consumer makes on each entry:
row changes of a table whose channel takes them as they come, and the
transaction ends between them, each past every position routed before it.
A :class:`Lane` routes such a stretch of a batch in one pass. It reads each
entry's header once, gathers each table's row changes into a
:class:`~canalbridge.sync.model.changes.RowRun` (columns, no object per
entry) and hands each channel its runs in one call. Then it tells each
owner in one step what the per-entry path would have told it entry by entry:
the positions taken (:class:`~canalbridge.sync.consumer.taken.BatchPositions`),
the stream's order and the transaction ends that closed rows
(:class:`~canalbridge.sync.consumer.stream_order.StreamOrder`), what was
routed since the last end (:class:`~canalbridge.sync.consumer.second_pass.SecondPass`),
the open source transaction and the pending work.

A stretch stops before the first entry that needs more, which the
Consumer routes itself:

- an entry not past the last position routed in the same binlog file (a
  resend, a rotated file, the first entry of an epoch);
- any entry but a row change (INSERT, UPDATE, DELETE), a TRANSACTIONBEGIN,
  a TRANSACTIONEND or the annotated SQL of a statement (MariaDB's) on no
  channel's table: DDLs and other statements, GTIDs, heartbeats;
- a row change of a table the lane must not take (:meth:`Delivery.lane_channel`:
  a snapshot window open on it, its rebuild waiting, the signal table, a
  channel that holds it already);
- a transaction end where a commit may be due (:class:`CutWatch`: it errs
  towards stopping, and the Consumer then decides as it always does).

No lane runs while Canal's second pass is being read (a stream that went
back), for a source whose entries carry no binlog positions (Kafka), or
one that marks no transaction ends. Used by the Consumer thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.consumer.delivery import Delivery
from canalbridge.sync.consumer.policy import CommitPolicy, Committing, PendingWork
from canalbridge.sync.consumer.second_pass import SecondPass
from canalbridge.sync.consumer.stream_order import StreamOrder
from canalbridge.sync.consumer.taken import BatchPositions
from canalbridge.sync.model.changes import RowRun
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.model.stats import ConsumerStats
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.schema.rows import DML_EVENTS, is_ddl, rows_count
from canalbridge.sync.source.link import Outstanding

# Plain ints: attribute lookups on protobuf enum wrappers are slow in a per-entry loop.
_ROWDATA = int(entry_pb.EntryType.ROWDATA)
_BEGIN = int(entry_pb.EntryType.TRANSACTIONBEGIN)
_END = int(entry_pb.EntryType.TRANSACTIONEND)
_QUERY = int(entry_pb.EventType.QUERY)


class CutWatch:
    """Whether a commit may be due at a transaction end of the stretch a lane routes: never wrong the other way.

    Of what :meth:`CommitPolicy.cut_reason` reads, only the pending entries
    and the clock change while a stretch is routed (bytes are counted as a
    batch is taken; acks, the store and a commit's end are met between
    stretches or at a cut). Anything due already, or a commit in flight
    with anything due, sends each transaction end back to the Consumer.
    """

    def __init__(self, policy: CommitPolicy, work: PendingWork, due_now: bool, start: int) -> None:
        settings = policy.settings
        self._due_now = due_now or work.cut_due is not None or work.bytes >= settings.max_bytes
        # Entries routed by the lane count before its cut check, as the Consumer counts them.
        self._due_at = (start + max(settings.min_events - work.events - 1, 0) if work.bytes >= settings.min_bytes
                        else None)
        self._started_at, self._interval = work.started_at, settings.interval_seconds

    def may_cut(self, index: int) -> bool:
        """Whether a commit may be due at the transaction end at ``index`` in the batch."""
        return (self._due_now or (self._due_at is not None and index >= self._due_at)
                or time.monotonic() - self._started_at >= self._interval)


class _TableLane:
    """One table's row changes in the stretch, for its channel."""

    __slots__ = ("channel", "run", "slot", "table")

    def __init__(self, channel: Channel | None, table: TableId | None, slot: list[_TableLane | None]) -> None:
        self.channel = channel
        self.table = table
        self.run: RowRun | None = None  # the open run, while it is its channel's latest (``slot``)
        self.slot = slot  # shared by the channel's tables: whose run is open on it


# Marks in the table cache: a table whose row changes the Consumer routes one by one, and one not met yet.
_SLOW = _TableLane(None, None, [None])
_UNKNOWN = _TableLane(None, None, [None])


class Lane:
    """Routes the plain stretches of one batch (see the module). Made per batch by the Consumer."""

    def __init__(self, entries: Sequence[entry_pb.Entry], lane_channel: Callable[[TableId, EntryPosition], object],
                 outstanding: Outstanding) -> None:
        """``lane_channel``: the channel that takes a table's row changes at a position as they come, None for a
        table no channel takes, anything else for one whose changes need the per-entry path. ``outstanding``:
        what the source held for the Consumer as the batch was taken (acks between stretches only lower it)."""
        self.entries = entries
        self.outstanding = outstanding
        self._lane_channel = lane_channel
        self._tables: dict[tuple[str, str], _TableLane | None] = {}
        self._slots: dict[int, list[_TableLane | None]] = {}  # by id(channel)
        self._runs: list[tuple[Channel, RowRun]] = []
        self.offsets: list[int] = []  # of the entries of the last stretch, in its one binlog file
        self.last: EntryPosition | None = None  # of the last stretch's last entry
        self.first_execute_time_ms = 0  # of its first entry
        self.rows_given = 0  # row changes the last stretch gave to channels
        self.ends: list[int] = []  # the indexes in the batch of its transaction ends that closed rows
        self.last_end: int | None = None  # the index in ``offsets`` of its last transaction end
        self.rows_since_end = False  # a row change follows its last transaction end (or the one before it)
        self.in_txn = False  # a source transaction is open where it stopped

    def forget_tables(self) -> None:
        """What a table's row changes need may have changed (the Consumer routed a row change or a statement)."""
        self._tables.clear()
        self._slots.clear()

    def route(self, start: int, journal: str, after: int, rows_since_end: bool, in_txn: bool, watch: CutWatch
              ) -> int:
        """Route the plain entries from ``start`` on: those in binlog file ``journal`` past offset ``after``.

        ``rows_since_end``: a row change was routed since the last transaction end; ``in_txn``: a source
        transaction is open. Returns where the stretch stopped (the length of the batch if it ran to the end);
        the fields describe what it routed, and :meth:`hand_over` gives its runs to their channels."""
        entries = self.entries
        count = len(entries)
        tables = self._tables
        offsets: list[int] = []
        ends: list[int] = []
        last_end: int | None = None
        rows = 0
        index = start
        while index < count:
            entry = entries[index]
            header = entry.header
            if header.logfileName != journal:
                break
            offset = header.logfileOffset
            if offset <= after:
                break
            kind = entry.entryType
            if kind == _ROWDATA:
                event_type = header.eventType
                schema_table = (header.schemaName, header.tableName)
                lane = tables.get(schema_table, _UNKNOWN)
                if lane is _UNKNOWN:
                    lane = self._resolve(schema_table, EntryPosition(journal, offset))
                if lane is _SLOW:
                    break
                if event_type in DML_EVENTS:
                    if lane is not None:
                        run = lane.run
                        if run is None or lane.slot[0] is not lane:
                            run = self._start_run(lane)
                        run.journals.append(journal)
                        run.offsets.append(offset)
                        run.execute_times.append(header.executeTime)
                        run.gtids.append(header.gtid)
                        run.row_changes.append(entry.storeValue)
                        run.rows.append(rows_count(header))
                        rows += 1
                    rows_since_end = in_txn = True
                elif event_type != _QUERY or lane is not None or (not in_txn and is_ddl(entry.storeValue)):
                    break
                else:
                    # The annotated SQL of a statement (MariaDB's), on no channel's table: it opens a source
                    # transaction (a statement standing alone, a DDL, was left to the Consumer above).
                    in_txn = True
            elif kind == _END:
                if index + 1 < count and watch.may_cut(index):
                    break  # the Consumer routes it and decides
                if rows_since_end:
                    ends.append(index)
                    rows_since_end = False
                last_end = len(offsets)
                in_txn = False
            elif kind == _BEGIN:
                in_txn = True
            else:
                break
            offsets.append(offset)
            after = offset
            index += 1
        self._close(start, index, journal, offsets, ends, last_end, rows_since_end, in_txn, rows)
        return index

    def _resolve(self, schema_table: tuple[str, str], position: EntryPosition) -> _TableLane | None:
        table = TableId(*schema_table)
        channel = self._lane_channel(table, position)
        lane: _TableLane | None
        if isinstance(channel, Channel):
            lane = _TableLane(channel, table, self._slots.setdefault(id(channel), [None]))
        else:
            lane = None if channel is None else _SLOW
        self._tables[schema_table] = lane
        return lane

    def _start_run(self, lane: _TableLane) -> RowRun:
        """A new run for ``lane``'s table: the first of the stretch, or after another table's on its channel."""
        assert lane.channel is not None and lane.table is not None
        run = lane.run = RowRun(lane.table)
        self._runs.append((lane.channel, run))
        lane.slot[0] = lane
        return run

    def hand_over(self) -> None:
        """Hand the last stretch's runs to their channels, in stream order (a channel's queue may hold this back)."""
        runs, self._runs = self._runs, []
        for lane in self._tables.values():
            if lane is not None:
                lane.run = None
        for channel, run in runs:
            channel.add_rows(run)

    def _close(self, start: int, stop: int, journal: str, offsets: list[int], ends: list[int], last_end: int | None,
               rows_since_end: bool, in_txn: bool, rows: int) -> None:
        """Note what the stretch routed."""
        self.offsets, self.ends, self.last_end = offsets, ends, last_end
        self.rows_since_end, self.in_txn, self.rows_given = rows_since_end, in_txn, rows
        if stop > start:
            first, last = self.entries[start].header, self.entries[stop - 1].header
            self.first_execute_time_ms = first.executeTime
            self.last = EntryPosition(journal, last.logfileOffset, last.executeTime, last.gtid)
        else:
            self.last = None


class Lanes:
    """Runs the Consumer's lanes, and tells the owners of its state what a stretch routed, as the per-entry
    path would have told them. Used by the Consumer thread only."""

    def __init__(self, delivery: Delivery, order: StreamOrder, second: SecondPass, policy: CommitPolicy,
                 stats: ConsumerStats) -> None:
        self._delivery = delivery
        self._order = order
        self._second = second
        self._policy = policy
        self._stats = stats

    def lane(self, entries: Sequence[entry_pb.Entry], outstanding: Outstanding) -> Lane:
        """A lane over one batch's ``entries``; ``outstanding``: what the source holds for the Consumer now."""
        return Lane(entries, self._delivery.lane_channel, outstanding)

    def stretch(self, lane: Lane, start: int, work: PendingWork, taken: BatchPositions,
                in_flight: Committing | None) -> int:
        """Route the plain stretch of the batch from ``start`` through ``lane``, note what it routed, and hand
        its runs to their channels; where it stopped. ``in_flight``: the commit being applied, if any."""
        order = self._order
        floor = _later(order.high, self._second.routed.last)
        if floor is None:
            return start  # (the first entry of an epoch: the per-entry path meets it)
        journal, after = floor
        # Due now, while a commit runs or not: what that commit changes is met between stretches.
        due_now = self._policy.due(work, lane.outstanding, time.monotonic(),
                                   in_flight.outstanding if in_flight is not None else None) is not None
        stop = lane.route(start, journal, after, order.rows_since_end, work.in_source_txn,
                          CutWatch(self._policy, work, due_now, start))
        if stop == start:
            return start
        offsets = lane.offsets
        taken.extend(journal, offsets)
        assert lane.last is not None
        ends = [EntryPosition.of(lane.entries[at]) for at in lane.ends[-3:]]  # (the stream's order keeps three)
        order.routed_in_order(lane.last, ends, lane.rows_since_end)
        self._second.routed.routed_in_order(journal, offsets, lane.last_end)
        if not work.events:
            self._stats.routed_first(lane.first_execute_time_ms)
        work.events += len(offsets)
        self._stats.entries += len(offsets)
        self._stats.rows_routed += lane.rows_given
        if lane.last_end is not None:
            work.close_source_txn()
        if lane.in_txn:
            work.open_source_txn()
        lane.hand_over()  # (last: a full channel queue holds it back, as it held back each entry)
        return stop


def _later(high: Position | None, routed: tuple[tuple[str, int, str], int] | None) -> tuple[str, int] | None:
    """The binlog file and offset of the later of the stream's latest position and the latest noted as routed
    since a transaction end (that survives a rollback), or None if either is unknown or not a binlog position."""
    if not isinstance(high, EntryPosition):
        return None
    if routed is not None and routed > high.sort_key:
        return routed[0][2], routed[1]
    return high.journal, high.offset
