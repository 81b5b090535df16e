"""One chunk's window: the keys of its table that the stream changed between the chunk's two watermarks.

A chunk is read after its *open* signal and before its *close* signal. A
row whose key the stream changed between the two may have been read before
the change or after it, so the chunk's row for that key is dropped and the
stream's changes stand. Every other row of the chunk is the table's row as
of the close signal, and goes into the target there, in the transaction
that routes the close signal, ordered after the changes before it.

The window stays open until that transaction *lands*: if it is aborted,
the replay routes the close signal again, and the keys seen so far still
count (a replay routes the same changes again). An UPDATE that changes a
key touches two keys: the old one (now gone) and the new one.

A *rebuild* window (``replaces`` true) carries a mark (no row) whose
channel replaces its target there: the target is made anew from the
columns and key the source has at the open signal, and the channel
applies its table's changes from the close signal on (those before it are
the snapshot's to read).

A *verify* window (``applies`` false, :mod:`canalbridge.sync.snapshot.verify`)
carries no chunk into the target: its close signal only marks the point the
target must reach before it is compared with the rows read, and it goes on
noting keys until it is forgotten, so that every change the compared target
holds since the open signal is noted.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db.chunks import KeyRange
from canalbridge.source_db.signals import Signal
from canalbridge.sync.errors import KeyColumnMissing
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.snapshot.progress import TableProgress

# A key's values as Canal renders them (None: NULL), in the key's column order. Not comparable with the values
# a chunk read returns: the sink types both the way it types every row before it compares them.
CanalKey = tuple[str | None, ...]


def changed_keys(change: entry_pb.RowChange, columns: Sequence[str]) -> Iterator[CanalKey]:
    """The keys the rows of ``change`` touch: each row's before image's (a DELETE, an UPDATE) and after image's
    (an INSERT, an UPDATE), by the key's ``columns`` (names compare without case, as MySQL's do)."""
    wanted = [column.lower() for column in columns]
    for row in change.rowDatas:
        for image in (row.beforeColumns, row.afterColumns):
            if image:
                yield _key_of(image, wanted)


def _key_of(image: Iterable[entry_pb.Column], wanted: Sequence[str]) -> CanalKey:
    values = {column.name.lower(): None if column.isNull else column.value for column in image}
    try:
        return tuple(values[name] for name in wanted)
    except KeyError as exc:
        raise KeyColumnMissing(f"a row image without the key column {exc.args[0]!r}") from None


def signals_in(change: entry_pb.RowChange) -> Iterator[Signal]:
    """The signals a change of the signal table carries: its inserted rows that hold one."""
    if change.eventType != entry_pb.EventType.INSERT:
        return  # (a DELETE clears old signal rows)
    for row in change.rowDatas:
        signal = Signal.from_row({column.name.lower(): None if column.isNull else column.value
                                  for column in row.afterColumns})
        if signal is not None:
            yield signal


@dataclass(frozen=True)
class SnapshotChunk:
    """A chunk's rows as read between its window's signals, for the channel of its table.

    ``rows`` is the writer's own handle on them (a Spark DataFrame for the
    Iceberg writers): each row's values as the stream's conversion takes
    them (Canal's text, or the value itself), in the order of
    ``columns``, the source table's columns as the read found them.
    ``progress`` is the table's once this chunk lands: it is committed with it.
    ``span``: the keys the read took whole, its ranges end to end (None: a
    mark of progress, which read nothing). ``held``: whether ``rows`` still
    holds every row read (a Spark JVM that died lost them).
    """

    columns: tuple[SourceColumn, ...]
    rows: object
    count: int
    progress: TableProgress
    span: KeyRange | None = None
    held: Callable[[], bool] = lambda: True  # whether ``rows`` still holds every row read (see ChunkReader.holds)


class WindowState(enum.Enum):
    REGISTERED = "registered"  # the open signal is being written: not in the stream yet
    OPEN = "open"  # the stream passed the open signal: changes of the table are noted
    CLOSED = "closed"  # the close signal was routed: the chunk is in the open transaction labelled ``label``
    LANDED = "landed"  # that transaction landed: the chunk is in the target
    SPOILED = "spoiled"  # a DDL on the table came while it was open, or its rows were lost: read again, in a new window


class ChunkWindow:
    """The window of one chunk of ``table`` (schema, table), keyed by ``key_columns``. Its state moves on the
    Consumer thread; the snapshot's thread reads :attr:`state` once it is LANDED (see the job's hand-off)."""

    def __init__(self, window_id: str, table: TableId, key_columns: Sequence[str], *,
                 applies: bool = True, replaces: bool = False, span: KeyRange | None = None) -> None:
        self.id = window_id
        self.table = table
        self.key_columns = tuple(key_columns)
        self.applies = applies  # False: a verify window, whose close signal carries no chunk
        self.replaces = replaces  # True: a rebuild's mark, where the channel's target is made anew
        self.state = WindowState.REGISTERED
        self.label: str | None = None
        self.chunk: SnapshotChunk | None = None  # given before the close signal is written (Windows.ready)
        # The source of the channel its chunk went to, set by the Consumer at the close signal (a merged target's
        # channel is named by its rule, not by this table); unset, the table's own name.
        self.channel: str | None = None
        self.lost = False  # its chunk's rows were lost (a Spark JVM that died): the replay gives it up
        self._keys: set[CanalKey] = set()
        # The chunk's keys, where they are integers: only a key among them can change the chunk (MySQL and
        # Python order integers alike; text under a collation, they do not: every key is noted then).
        self._span = _integer_span(span)

    @property
    def source(self) -> str:
        """``schema.table``, as the channel of the table names its source."""
        return ".".join(self.table)

    @property
    def keys(self) -> frozenset[CanalKey]:
        """The keys the stream changed in the window so far."""
        return frozenset(self._keys)

    @property
    def noting(self) -> bool:
        """Whether changes of the table routed now fall in the window (a verify window's: from its open signal
        until it is forgotten)."""
        if self.applies:
            return self.state is WindowState.OPEN
        return self.state in (WindowState.OPEN, WindowState.CLOSED, WindowState.LANDED)

    def opened(self) -> None:
        """The stream passed the open signal. Met again (a replay), it changes nothing: an open window stays
        open with the keys noted, a closed one waits for its transaction, and only an abort reopens it."""
        if self.state is WindowState.REGISTERED:
            self.state = WindowState.OPEN

    def note(self, change: entry_pb.RowChange) -> None:
        """A change of the table routed while the window is open."""
        if self.noting and self.key_columns:  # (a mark without a key reads no row: nothing to drop)
            keys = changed_keys(change, self.key_columns)
            span = self._span
            self._keys.update(keys if span is None else (key for key in keys if _within(key, *span)))

    def closed(self, label: str) -> bool:
        """The close signal was routed in transaction ``label``: True if the chunk goes into it now (False: a
        signal of a window not open, such as one routed again after its chunk landed)."""
        if self.state is not WindowState.OPEN:
            return False
        self.state, self.label = WindowState.CLOSED, label
        return True

    def spoiled(self) -> bool:
        """A DDL on the table was routed while the window was noting: True if that ends it (the chunk may hold
        rows read on either side of the DDL)."""
        if self.noting:
            self.state = WindowState.SPOILED
            return True
        return False

    def aborted(self) -> None:
        """The open transaction was dropped: its replay routes the close signal again."""
        if self.state is WindowState.CLOSED:
            self.state, self.label = WindowState.OPEN, None

    def landed(self, label: str) -> bool:
        """Transaction ``label`` landed: True if it carried this window's chunk (the window is then done)."""
        if self.state is WindowState.CLOSED and self.label == label:
            self.state = WindowState.LANDED
            return True
        return False

    def held(self) -> None:
        """The target held the chunk already when the close signal was routed (its channel had committed past
        it: a commit that reported failure but landed): the window is done."""
        if self.state is WindowState.CLOSED:
            self.state = WindowState.LANDED


_IntegerKey = tuple[int, ...]


def _integer_span(span: KeyRange | None) -> tuple[_IntegerKey | None, _IntegerKey | None] | None:
    """``span``'s bounds, if it has one and its values are integers (as the source returned them)."""
    if span is None or (span.after is None and span.through is None):
        return None
    integers = [None if bound is None else _integers(bound) for bound in (span.after, span.through)]
    if any(value is None for value, bound in zip(integers, (span.after, span.through)) if bound is not None):
        return None
    return integers[0], integers[1]


def _integers(values: Sequence[object]) -> _IntegerKey | None:
    ints = [value for value in values if isinstance(value, int) and not isinstance(value, bool)]
    return tuple(ints) if len(ints) == len(values) else None


def _within(key: CanalKey, after: _IntegerKey | None, through: _IntegerKey | None) -> bool:
    """Whether ``key`` (Canal's text) lies after ``after`` through ``through``; a key that is not integers is."""
    try:
        values = tuple(int(value) for value in key)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True
    return (after is None or values > after) and (through is None or values <= through)
