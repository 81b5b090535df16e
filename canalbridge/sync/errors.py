"""Typed errors of the sync core, each carrying where it happened."""

from __future__ import annotations

import re
from collections.abc import Sequence

from canalbridge.canal.errors import CanalAuthError
from canalbridge.sync.model.position import Position


class SyncError(Exception):
    """Base class of sync-core failures."""

    #: whether retrying the same data can succeed (a lost connection, a failed
    #: write) or cannot (a row that does not fit its table)
    transient = True


class RowMappingError(SyncError):
    """A row that does not fit its target: names the table, the counts and the binlog position."""

    transient = False

    def __init__(self, table: str, message: str, position: Position | None) -> None:
        self.table = table
        self.position = position
        where = f" at binlog position {position}" if position else ""
        super().__init__(f"table {table}{where}: {message}")


class EntryDecodeError(RowMappingError):
    """A ROWDATA entry whose storeValue does not parse as a RowChange."""

    def __init__(self, table: str, detail: str, position: Position | None) -> None:
        super().__init__(table, f"the entry's storeValue is not a RowChange ({detail})", position)


class ColumnsChangedError(SyncError):
    """A writer that decodes rows itself met a RowChange whose columns are not the channel's.

    The channel turns it into its mapper's :class:`RowMappingError`, which
    names the last DDL seen on the table.
    """

    transient = False

    def __init__(self, table: str, columns: str, count: int, position: Position) -> None:
        self.table = table
        self.columns = columns  # "name mysqlType, ..." as the RowChange has them
        self.count = count  # how many
        self.position = position
        super().__init__(f"table {table}: the row's columns changed to ({columns}) at {position}")


class SnapshotError(SyncError):
    """A table's snapshot cannot go on: names the table and why (the job pauses; resumed, it goes on from the
    last chunk its target holds)."""

    transient = False

    def __init__(self, table: str, message: str) -> None:
        self.table = table
        super().__init__(f"snapshot of table {table}: {message}")


def rebuild_remedy(job: str, table: str) -> str:
    """What to run when only a new target puts ``table`` back in line (a pause names it)."""
    return (f"make the target anew from the source with `canalbridge rebuild {job} {table}` "
            f"(docs/guide/operations.md#rebuild)")


class SchemaChangeError(SyncError):
    """A DDL the target cannot follow (a narrowing type change, say): names the table, the DDL and its position."""

    transient = False

    def __init__(self, table: str, sql: str, position: Position, reason: str) -> None:
        self.table = table
        self.sql = sql
        self.position = position
        super().__init__(f"table {table}: cannot apply the DDL {sql!r} at {position}: {reason}")


class TargetKeyMismatchError(SyncError):
    """An upsert target is keyed by other columns than the rows sent to it: upserts would merge rows the
    source tells apart (or keep two the target's key says are one)."""

    transient = False

    def __init__(self, table: str, target: str, rows_key: Sequence[str], target_key: Sequence[str],
                 remedy: str) -> None:
        self.table = table
        self.target = target
        self.rows_key = tuple(rows_key)
        self.target_key = tuple(target_key)
        super().__init__(f"table {table}: its rows are keyed by ({', '.join(rows_key)}), but target {target} by "
                         f"({', '.join(target_key)}) (table property canalbridge.primary-key): {remedy}")


class ChannelCommitError(SyncError):
    """A channel could not send or commit its part of a transaction."""

    def __init__(self, channel: str, label: str, cause: BaseException) -> None:
        self.channel = channel
        self.label = label
        self.cause = cause
        self.transient = getattr(cause, "transient", True)
        super().__init__(f"channel {channel} transaction {label}: {cause}")


class PublishFailed(SyncError):
    """A job's catalog commit of several targets' staged writes that did not report success (``[job.cuts]
    atomic``). ``refused``: the catalog applied none of it; otherwise it may have applied all of it."""

    def __init__(self, targets: tuple[str, ...], refused: bool, message: str) -> None:
        self.targets = targets
        self.refused = refused
        super().__init__(message)


class ChannelStuckError(SyncError):
    """A channel's thread did not finish its work within the bound: a commit (or maintenance) that hangs."""

    # Retrying cannot help while the channel's thread is still busy with the old commit.
    transient = False

    def __init__(self, channel: str, label: str, doing: str, waited_s: float, *,
                 setting: str = "commit_timeout_seconds") -> None:
        self.channel = channel
        self.label = label
        self.waited_s = waited_s
        super().__init__(
            f"channel {channel} transaction {label}: {doing} did not finish in {waited_s:g} s "
            f"({setting}); whether it landed is read back from the target at resume; "
            f"nothing after the last ack was acked"
        )


class ReceiverGaveUp(SyncError):
    """The receiver could not reach its source (Canal, or Kafka) within its reconnect attempts."""

    def __init__(self, source: str, attempts: int, cause: BaseException) -> None:
        self.source = source
        self.attempts = attempts
        self.cause = cause
        # An outage may pass; credentials Canal refused stay refused until a person changes them.
        self.outage = not isinstance(cause, CanalAuthError)
        super().__init__(f"{source}: gave up after {attempts} connection attempts: {cause}")


class KafkaSourceError(SyncError):
    """Reading Canal's Kafka topic failed: names the brokers and topic (and partition and offset for a record)."""

    def __init__(self, source: str, message: str, *, transient: bool = True) -> None:
        self.source = source
        self.transient = transient
        super().__init__(f"{source}: {message}")


class KafkaRecordError(KafkaSourceError):
    """A record that is not a Canal message of the configured format: nothing past it is committed."""

    def __init__(self, source: str, partition: int, offset: int, reason: str) -> None:
        self.partition = partition
        self.offset = offset
        super().__init__(source, f"the record at partition {partition} offset {offset} is not a Canal message: "
                                 f"{reason}", transient=False)


class CanalContinuityError(SyncError):
    """Canal kept serving batches that could not be proven contiguous with what was acked."""

    transient = False

    def __init__(self, address: str, destination: str, reasons: list[str]) -> None:
        self.address = address
        self.destination = destination
        self.reasons = reasons
        super().__init__(
            f"canal {address} destination {destination!r}: {len(reasons)} batches in a row could not be proven "
            f"contiguous with the ack cursor (is another client reading this destination?); last: {reasons[-1]}"
        )


class TargetSourceMismatchError(SyncError):
    """A target holds a position of the other kind of source (Canal over TCP, or Kafka): they do not compare."""

    transient = False

    def __init__(self, job: str, target: str, message: str) -> None:
        self.job = job
        self.target = target
        super().__init__(f"job {job}: target {target} {message}")


class RouteConflictError(SyncError):
    """A table a rule takes would go into a target another channel of the job writes."""

    transient = False

    def __init__(self, job: str, table: str, target: str, owner: str) -> None:
        self.job = job
        self.table = table
        self.target = target
        super().__init__(f"job {job}: table {table} would go into {target}, which channel {owner} writes; give "
                         f"the rules targets that do not meet")


class ChannelOpenError(SyncError):
    """A channel for a table that just appeared could not open its target."""

    def __init__(self, channel: str, target: str, cause: BaseException) -> None:
        self.channel = channel
        self.target = target
        self.cause = cause
        self.transient = getattr(cause, "transient", True)
        super().__init__(f"channel {channel}: cannot open its target {target}: {cause}")


class SourceChangedError(SyncError):
    """Canal sent an entry from another binlog than the one acked: a MySQL failover or a reset binlog."""

    transient = False

    def __init__(self, address: str, destination: str, position: Position, acked: Position,
                 why: str | None = None) -> None:
        self.position = position
        self.acked = acked
        super().__init__(
            f"canal {address} destination {destination!r}: entry at {position} cannot follow the acked position "
            f"{acked}{f' ({why})' if why else ''} (another binlog: a MySQL failover or a reset binlog?). "
            f"Positions no longer compare, so nothing was applied; see docs/design/delivery-semantics.md#failover"
        )


class SourceSwitchedError(SyncError):
    """Within one connection the stream went back further than Canal's own second pass ever goes.

    After its MySQL connection breaks, Canal dumps again from the last
    transaction end it recorded, which trails the ends of rows it sent by at
    most two; going back further, or to a file of another name, means the
    entries come from another binlog (Canal switched masters, or was pointed
    at another server).
    """

    transient = False

    def __init__(self, job: str, position: Position, after: Position) -> None:
        self.job = job
        self.position = position
        self.after = after
        super().__init__(
            f"job {job}: in one connection, Canal sent an entry at {position} after {after}, further back than "
            f"it ever sends part of the binlog again: entries of another binlog (Canal switched MySQL servers?). "
            f"Positions no longer compare, so nothing of it was applied; see "
            f"docs/design/delivery-semantics.md#failover"
        )


class PatternError(ValueError):
    """A source pattern or target template that cannot be used; the message says why."""


class JobStateError(Exception):
    """A transition the state machine does not allow (e.g. resuming a cancelled job), or a request the job's
    state refuses (a snapshot of a paused job)."""


class ProgressFormatError(ValueError):
    """Stored progress this version cannot read."""


class KeyColumnMissing(ValueError):
    """A row image without a column of the snapshot's key (the binlog must hold full row images)."""


class Stopping(Exception):
    """Raised out of a back-off wait when the job is stopping."""


_JAVA_EXCEPTION = re.compile(r"^(?:[\w$]+\.)+[\w$]*(?:Exception|Error): ")
BRIEF_CHARS = 500  # a Spark error's text can carry the whole JVM stack
PY4J_CALL = "An error occurred while calling"  # how Py4J begins a Java error's text


def first_line(exc: BaseException) -> str:
    """What failed, in one bounded line: under Py4J's "An error occurred while calling ...", the Java exception's
    own message; else the error's first line, else its type's name."""
    lines = [line.strip().lstrip(": ") for line in str(exc).strip().splitlines()]
    py4j = bool(lines) and lines[0].startswith(PY4J_CALL)
    cause = next((line for line in lines if _JAVA_EXCEPTION.match(line)), None) if py4j else None
    return (cause or (lines[0] if lines and lines[0] else type(exc).__name__))[:BRIEF_CHARS]
