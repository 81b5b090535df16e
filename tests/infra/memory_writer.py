"""An in-memory target (all four parts of a ChannelSink) with failure injection, for tests and benchmarks."""

from __future__ import annotations

import contextlib
import operator
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from canalbridge.mysql_types import canonical
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.maintenance import MaintenanceReport
from canalbridge.sync.channel.sink import TargetState
from canalbridge.sync.errors import ColumnsChangedError, PublishFailed
from canalbridge.sync.model.changes import (
    Alteration,
    BeforeImages,
    ChangeKind,
    ChangeRow,
    ChunkBatch,
    RawBatch,
    RowBatch,
)
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.schema.ddl import (
    DropColumn,
    RenameTable,
    TruncateTable,
    columns_after,
    key_after,
    renamed,
)
from canalbridge.sync.schema.rows import RowMapper, column_signature
from canalbridge.sync.settings import MaintenanceSettings
from canalbridge.sync.snapshot.progress import TableProgress


class InjectedFailure(Exception):
    """A failure the test asked an :class:`InMemoryWriter` to raise."""


@dataclass
class CommitRecord:
    """One committed transaction, for tests to inspect."""

    label: str
    end_position: Position
    rows: int
    behind: Position | None = None  # where a commit behind the table's position really reached
    snapshot: dict[str, TableProgress] = field(default_factory=dict)  # the snapshot's progress it stamps


@dataclass
class InMemoryWriter:
    """A target table in a dict, keyed by primary key; thread-safe.

    Failures can be injected: ``fail_send_at``/``fail_commit_at`` name the
    1-based call (counted over the writer's life) that raises,
    ``fail_after_commit_at`` the commit that lands and then raises (a reply
    lost on the way back), and ``before_commit`` runs inside every apply (to
    block or inspect), held or not; ``maintenance`` (if set) runs as :meth:`maintain`, and
    the writer checks that no commit ever runs at the same time as it. With
    ``keep_changes`` it also counts the row changes each binlog position
    brought, as a changelog would hold them. With ``decode_raw`` it takes
    RowChange bytes (:meth:`send_raw`) as the Spark writer does with its JVM
    decoder, and fails the commit the same way on a RowChange whose columns
    changed. :meth:`alter` renames and drops the columns of the rows it
    holds as a DDL says (``fail_alter_at`` names the 1-based call that
    raises instead) and records each DDL applied in ``alterations``. An
    apply with ``publish=False`` is held: :attr:`rows` and the commits show
    it only once an apply publishes, with it (a failed apply drops it).
    A sealed transaction's ``stage`` counts as a commit call (and fails as
    one) but lands only when an :class:`InMemoryPublisher` publishes it.
    """

    table: str
    columns: tuple[str, ...] | None = None
    fail_send_at: set[int] = field(default_factory=set)
    fail_commit_at: set[int] = field(default_factory=set)
    fail_after_commit_at: set[int] = field(default_factory=set)
    fail_alter_at: set[int] = field(default_factory=set)
    before_commit: Callable[[InMemoryWriter, Position], None] | None = None
    maintenance: Callable[[InMemoryWriter], None] | None = None
    maintenance_runs: int = 0
    state_reads: list[str] = field(default_factory=list)  # the name of the thread of each read_state()
    forgotten_commits: int = 0  # commits before a forget_position(): their positions are not read back
    rebuild_marked: bool = False  # mark_rebuild() was called, and no commit landed since
    replaced: int = 0  # times the table was made anew by a rebuild's first commit
    discarded_writes: int = 0  # staged writes discarded (never published)
    _maintaining: bool = False
    keep_changes: bool = False
    decode_raw: bool = False
    _raw_failure: ColumnsChangedError | None = None
    changes: Counter[Position] = field(default_factory=Counter)
    # key -> (column names, values): a dict per row would cost more than decoding it.
    _table: dict[tuple[str | None, ...], tuple[tuple[str, ...], tuple[str | None, ...]]] = field(
        default_factory=dict)
    commits: list[CommitRecord] = field(default_factory=list)
    aborts: list[str] = field(default_factory=list)
    sends: int = 0
    commit_calls: int = 0
    alter_calls: int = 0
    alterations: list[tuple[str, Position]] = field(default_factory=list)  # (DDL, stamp) as applied
    renamed_to: str | None = None  # the source table's name after a RENAME TABLE the channel followed
    aliases: dict[str, str] = field(default_factory=dict)  # a shared target's renamed columns (see sink.TargetState)
    _staged: list[RowBatch] = field(default_factory=list)
    _progress: dict[str, TableProgress] = field(default_factory=dict)  # of the chunks staged
    chunks: list[ChunkBatch] = field(default_factory=list)  # every chunk sent, for tests
    snapshot: dict[str, TableProgress] = field(default_factory=dict)  # as the last commit left it
    # Applied, not published: (sealed, stamp, label, behind).
    _held: list[tuple[SealedInMemory, Position, str, Position | None]] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)  # (re-entered by a publish's ``after``)

    @property
    def rows(self) -> dict[tuple[str | None, ...], dict[str, str | None]]:
        """The target's rows, keyed by primary key: column name -> Canal text."""
        with self._lock:
            return {key: dict(zip(names, values)) for key, (names, values) in self._table.items()}

    def read_state(self) -> TargetState:
        with self._lock:
            self.state_reads.append(threading.current_thread().name)
            last = self.commits[-1] if len(self.commits) > self.forgotten_commits else None
            if last is None and self.rebuild_marked:
                return TargetState(rebuild=True)
            if last is None:
                return TargetState(self.columns, aliases=dict(self.aliases), source_table=self.renamed_to)
            return TargetState(self.columns, last.end_position, last.label, last.behind, dict(self.aliases),
                               self.renamed_to, dict(last.snapshot))

    def before_images(self) -> BeforeImages:
        return BeforeImages.KEY_CHANGES  # a table keyed by the primary key

    def layout_note(self) -> str | None:
        return None  # memory has no layout

    def committed_position(self) -> Position | None:
        """The position the last commit carries, for tests (the channel reads :meth:`read_state`)."""
        with self._lock:
            return self.commits[-1].end_position if len(self.commits) > self.forgotten_commits else None

    def empty(self, *, keep_position: bool) -> None:
        """What an operator does to a target: ``DELETE FROM`` it (``keep_position``: its snapshots still carry
        the position), or drop and create it again (no position)."""
        with self._lock:
            self._table.clear()
            if not keep_position:
                self.forgotten_commits = len(self.commits)

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        assert self.keep_changes, f"{self.table}: a changelog's changes are kept with keep_changes"
        with self._lock:
            return {(p.journal, p.offset) for p in self.changes
                    if isinstance(p, EntryPosition) and after < p <= through}

    def forget_position(self) -> None:
        with self._lock:
            self.forgotten_commits = len(self.commits)
            self.rebuild_marked = False

    def mark_rebuild(self) -> bool:
        with self._lock:
            if self.columns is None and not self.commits:
                return False
            self.forgotten_commits, self.rebuild_marked = len(self.commits), True
            return True

    def begin(self) -> None:
        with self._lock:
            self._staged, self._progress = [], {}

    def send(self, batch: RowBatch) -> None:
        with self._lock:
            self.sends += 1
            if self.sends in self.fail_send_at:
                raise InjectedFailure(f"injected failure on send #{self.sends} to {self.table}")
            self._staged.append(batch)

    def decodes_row_changes(self) -> bool:
        return self.decode_raw

    def send_raw(self, batch: RawBatch) -> None:
        assert self.decode_raw, "send_raw on a writer that does not decode"
        expected = column_signature([(c.name, canonical(c.mysql_type), c.is_key) for c in batch.columns])
        mapper = RowMapper(batch.table, batch.target_columns, [batch.target_columns[i] for i in batch.key_indexes],
                           before_images=self.before_images())
        rows = []
        run = batch.changes
        for index, row_change in enumerate(run.row_changes):
            position = run.position(index)
            change = entry_pb.RowChange.FromString(row_change)
            first = change.rowDatas[0] if change.rowDatas else None
            columns = (first.afterColumns or first.beforeColumns) if first is not None else []
            found = (column_signature([(c.name, canonical(c.mysqlType), c.isKey) for c in columns]) if first is not None
                     else expected)
            if found != expected:  # as the JVM decoder does, found when the commit runs
                self._raw_failure = self._raw_failure or ColumnsChangedError(batch.table, found, len(columns),
                                                                             position)
                continue
            rows.extend(mapper.map(change, position))
        if rows:
            self.send(mapper.batch(rows))

    def send_chunk(self, batch: ChunkBatch) -> None:
        """A chunk whose ``rows`` are tuples of Canal's text, in the order of the source's columns."""
        key_of = operator.itemgetter(*batch.key_indexes)
        single_key = len(batch.key_indexes) == 1
        rows = []
        for values in batch.rows:  # type: ignore[attr-defined]
            row = tuple(values) + batch.origin
            key = (key_of(row),) if single_key else key_of(row)
            if key not in batch.dropped:
                rows.append(ChangeRow(ChangeKind.INSERT, row, batch.position))
        with self._lock:
            self.chunks.append(batch)
            self._progress[batch.progress.table] = batch.progress
        self.send(RowBatch(batch.table, batch.target_columns, batch.columns, batch.key_indexes, tuple(rows)))

    def seal(self) -> SealedInMemory:
        with self._lock:
            sealed = SealedInMemory(self, self._staged, self._raw_failure, dict(self._progress))
            self._staged, self._raw_failure, self._progress = [], None, {}
        return sealed

    def commit(self, end_position: Position, label: str) -> None:
        """Seal the open transaction and apply it at once."""
        self.seal().apply(end_position, label)

    def _apply(self, sealed: SealedInMemory, end_position: Position, label: str, publish: bool,
               behind: Position | None, *, stage: bool = False) -> StagedInMemory | None:
        """Apply (or, with ``stage``, stage: it lands once an :class:`InMemoryPublisher` publishes it)."""
        with self._lock:
            held, self._held = self._held, []  # back only if this apply holds too: a failure drops them
        if sealed.raw_failure is not None:
            self._dropped("commit failed")
            raise sealed.raw_failure
        if self._maintaining:
            raise AssertionError(f"{self.table}: a commit while maintenance runs")
        if self.before_commit is not None:
            self.before_commit(self, end_position)
        with self._lock:
            self.commit_calls += 1
            if self.commit_calls in self.fail_commit_at or (
                    not publish and self.commit_calls in self.fail_after_commit_at):
                self.aborts.append("commit failed")
                raise InjectedFailure(f"injected failure on commit #{self.commit_calls} to {self.table}")
            last = held[-1][1] if held else (
                self.commits[-1].end_position if len(self.commits) > self.forgotten_commits else None)
            if last is not None and end_position < last:
                raise AssertionError(f"{self.table}: commit at {end_position} is before {last}")
            if stage:
                assert not held, f"{self.table}: a write staged while rows are held"
                return StagedInMemory(self, sealed, end_position, label, behind)
            if not publish:
                self._held = [*held, (sealed, end_position, label, behind)]
                return None
            for step in [*held, (sealed, end_position, label, behind)]:
                self._land(*step)
            if self.commit_calls in self.fail_after_commit_at:
                raise InjectedFailure(f"injected lost reply after commit #{self.commit_calls} to {self.table}")
        return None

    def _land(self, sealed: SealedInMemory, end_position: Position, label: str, behind: Position | None) -> None:
        """Make one applied transaction visible (the caller holds the lock)."""
        if self.rebuild_marked:  # the first commit since: the table is made anew under it
            self._table.clear()
            self.replaced += 1
            self.rebuild_marked = False
        count = 0
        for batch in sealed.staged:
            names, key_of = batch.target_columns, operator.itemgetter(*batch.key_indexes)
            single_key = len(batch.key_indexes) == 1
            for row in batch.rows:
                key = (key_of(row.values),) if single_key else key_of(row.values)
                if row.kind.removes:
                    self._table.pop(key, None)
                else:
                    self._table[key] = (names, row.values)
            count += len(batch.rows)
            if self.keep_changes:
                self.changes.update(row.position for row in batch.rows)
        self.snapshot.update(sealed.progress)
        self.commits.append(CommitRecord(label, end_position, count, behind, dict(self.snapshot)))

    def alter(self, alteration: Alteration, stamp: Position, label: str) -> None:
        with self._lock:
            self.alter_calls += 1
            assert not self._held, f"{self.table}: a DDL applied while rows are held"
            if self.alter_calls in self.fail_alter_at:
                raise InjectedFailure(f"injected failure on alter #{self.alter_calls} of {self.table}")
            last = self.commits[-1].end_position if len(self.commits) > self.forgotten_commits else None
            if last is not None and stamp < last:
                raise AssertionError(f"{self.table}: DDL stamped {stamp} is before {last}")
            if any(isinstance(c, TruncateTable) for c in alteration.changes):
                self._table.clear()
            if self.columns is not None:
                if alteration.aliases is not None:  # (the channel computes them)
                    self.aliases = dict(alteration.aliases)
                self.columns = columns_after(self.columns, alteration.changes, drop=alteration.drop_columns)
            for key, (names, values) in list(self._table.items()):
                self._table[key] = _altered(names, values, alteration)
            new_key = key_after((), alteration.changes)
            if new_key:  # the source's primary key changed: the rows are keyed by the new one from here on
                self._table = self._rekeyed(new_key)
            for change in alteration.changes:
                if isinstance(change, RenameTable):
                    self.renamed_to = f"{change.to.schema}.{change.to.table}"
            self.alterations.append((alteration.sql, stamp))
            self.commits.append(CommitRecord(label, stamp, 0, snapshot=dict(self.snapshot)))

    def _rekeyed(self, key: tuple[str, ...]) -> dict[tuple[str | None, ...], tuple[tuple[str, ...],
                                                                                     tuple[str | None, ...]]]:
        rekeyed = {}
        for names, values in self._table.values():
            spelled = [name.lower() for name in names]
            new = tuple(values[spelled.index(column.lower())] for column in key)
            if new in rekeyed:
                raise ValueError(f"{self.table}: two rows have the key {new} under the new key ({', '.join(key)})")
            rekeyed[new] = (names, values)
        return rekeyed

    def _dropped(self, reason: str) -> None:
        with self._lock:
            self.aborts.append(reason)

    def abort(self, reason: str) -> None:
        with self._lock:
            self.aborts.append(reason)
            self._staged, self._raw_failure, self._progress = [], None, {}

    def maintain(self, settings: MaintenanceSettings) -> MaintenanceReport:
        self._maintaining = True
        try:
            self.maintenance_runs += 1
            if self.maintenance is not None:
                self.maintenance(self)
        finally:
            self._maintaining = False
        return MaintenanceReport()  # nothing piles up in a dict


@dataclass(frozen=True)
class SealedInMemory:
    """A transaction of an :class:`InMemoryWriter` waiting to be applied."""

    writer: InMemoryWriter
    staged: list[RowBatch]
    raw_failure: ColumnsChangedError | None
    progress: dict[str, TableProgress]  # of the chunks it holds

    def apply(self, end_position: Position, label: str, *, publish: bool = True,
              behind: Position | None = None) -> None:
        self.writer._apply(self, end_position, label, publish, behind)

    def stage(self, end_position: Position, label: str, *, behind: Position | None = None) -> StagedInMemory | None:
        return self.writer._apply(self, end_position, label, True, behind, stage=True)

    def discard(self, reason: str) -> None:
        self.writer._dropped(reason)


@dataclass
class StagedInMemory:
    """A staged write of an :class:`InMemoryWriter`: lands when an :class:`InMemoryPublisher` publishes it."""

    writer: InMemoryWriter
    sealed: SealedInMemory
    end_position: Position
    label: str
    behind: Position | None
    discarded: bool = False
    landed: bool = False

    @property
    def target(self) -> str:
        return self.writer.table

    def discard(self) -> None:
        assert not self.landed, f"{self.target}: the files of a write that landed deleted"
        self.discarded = True
        with self.writer._lock:
            self.writer.discarded_writes += 1


@dataclass
class InMemoryPublisher:
    """Publishes in-memory staged writes all at once: every writer's lock is held while they land, so a
    reader of the writers' rows sees all of a publish or none. ``refuse_at`` names the 1-based publishes that
    land nothing and say so, ``lose_reply_at`` those that land and then fail as a lost reply would,
    ``refuse_landed_at`` those that land and then are refused (a 409 answering the HTTP client's retry of the
    request that landed); ``after`` runs after each publish that landed, still holding the locks (it may read
    the writers' rows). A staged write discarded after it landed fails the test."""

    refuse_at: set[int] = field(default_factory=set)
    lose_reply_at: set[int] = field(default_factory=set)
    refuse_landed_at: set[int] = field(default_factory=set)
    after: Callable[[], None] | None = None
    publishes: int = 0
    published: list[tuple[str, ...]] = field(default_factory=list)  # the labels of each publish that landed

    def publish(self, staged: Sequence[StagedInMemory]) -> None:
        self.publishes += 1
        targets = tuple(each.target for each in staged)
        assert not any(each.discarded for each in staged), "a discarded write published"
        if self.publishes in self.refuse_at:
            raise PublishFailed(targets, True, f"injected refusal of publish #{self.publishes}")
        with self.locked([each.writer for each in staged]):
            for each in staged:
                each.writer._land(each.sealed, each.end_position, each.label, each.behind)
                each.landed = True
            self.published.append(tuple(each.label for each in staged))
            if self.after is not None:
                self.after()
        if self.publishes in self.lose_reply_at:
            raise PublishFailed(targets, False, f"injected lost reply of publish #{self.publishes}")
        if self.publishes in self.refuse_landed_at:
            raise PublishFailed(targets, True, f"injected refusal of the retry of publish #{self.publishes}")

    @staticmethod
    @contextlib.contextmanager
    def locked(writers: Sequence[InMemoryWriter]) -> Iterator[None]:
        """Hold every writer's lock (in one order, whoever asks)."""
        with contextlib.ExitStack() as stack:
            for writer in sorted({each.table: each for each in writers}.values(), key=lambda each: each.table):
                stack.enter_context(writer._lock)
            yield


def _altered(names: tuple[str, ...], values: tuple[str | None, ...],
             alteration: Alteration) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """A stored row's names and values after a DDL: renamed, and dropped if the DDL's target drops."""
    current = renamed(names, alteration.changes)
    dropped = {c.name.lower() for c in alteration.changes if isinstance(c, DropColumn)} \
        if alteration.drop_columns else set()
    kept = [name.lower() not in dropped for name in current]
    return (tuple(n for n, k in zip(current, kept) if k), tuple(v for v, k in zip(values, kept) if k))
