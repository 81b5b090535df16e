"""What is known of a job, as one value: its state, why, when, and how far it got.

A :class:`JobRecord` is what the state store keeps, what ``status`` shows
(live from a running job, or offline from the store) and what a restarted
daemon restores a job from.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from canalbridge.sync.model.cuts import PublishedCut
from canalbridge.sync.model.position import Ack, Position
from canalbridge.sync.snapshot.progress import SnapshotStatus
from canalbridge.sync.snapshot.verify import TableCheck


class JobState(Enum):
    """Doris's job states: PENDING -> RUNNING <-> PAUSED, and CANCELLED (final) from any of them; RUNNING ->
    FINISHED for a job whose snapshot is all it does (``mode = "only"``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"
    FINISHED = "FINISHED"


class FailKind(Enum):
    USER_CANCEL = "USER_CANCEL"
    SUBMIT_FAIL = "SUBMIT_FAIL"
    RUN_FAIL = "RUN_FAIL"
    #: a catalog, store or source that did not answer: the job is started again with back-off
    OUTAGE = "OUTAGE"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class FailMessage:
    """Why a job paused or was cancelled."""

    kind: FailKind
    text: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.text}"


@dataclass(frozen=True)
class ChannelRecord:
    """One channel of a job: where it writes and the last position committed there."""

    source: str
    target: str
    committed: Position | None = None
    layout_note: str | None = None  # live only (not in the state store): a layout that slows commits
    maintenance: str | None = None  # live only: the last maintenance run, when, and what it did
    rule: str | None = None  # the pattern of the rule that made the channel (from the config, not stored)
    snapshot: SnapshotStatus | None = None  # live only: its table's snapshot in this run, if one runs
    verify: TableCheck | None = None  # live only: its table's last verify in this run, if one was asked for


@dataclass(frozen=True)
class PartitionRecord:
    """One partition of a Kafka source (live only): committed and end offsets, and its last committed entry."""

    partition: int
    committed_offset: int | None
    end_offset: int | None
    binlog_position: str | None = None  # "journal:offset" of protobuf records; flat ones carry none
    execute_time_ms: int | None = None
    copies_dropped: int = 0  # entries Canal sent twice, dropped (protobuf records only)

    @property
    def lag(self) -> int | None:
        """Messages in the partition after the committed offset."""
        if self.end_offset is None:
            return None
        return max(self.end_offset - (self.committed_offset or 0), 0)


@dataclass(frozen=True)
class StartRetryStatus:
    """A job's retries of its start after an outage: how many so far and when the next one is due."""

    attempts: int  # starts that failed in a row
    next_try_ms: int  # wall-clock time of the next start


@dataclass(frozen=True)
class JobRecord:
    """A job's persistent facts, plus (live only) the threads that did not stop when asked."""

    name: str
    state: JobState
    channels: tuple[ChannelRecord, ...]
    fail: FailMessage | None = None
    create_time_ms: int | None = None
    last_start_time_ms: int | None = None
    last_stop_time_ms: int | None = None
    finish_time_ms: int | None = None
    ack: Ack | None = None
    last_commit_time_ms: int | None = None
    updated_ms: int | None = None
    #: threads of an earlier run still busy after their stop bound (a hung commit)
    stuck: tuple[str, ...] = ()
    #: live only: each partition of a Kafka source
    partitions: tuple[PartitionRecord, ...] = ()
    #: live only: the starts that failed in a row for an outage, and the next one, while one is scheduled
    start_retry: StartRetryStatus | None = None
    #: live only: the newest consistent cut the job's log holds, and why the last one taken was not logged
    cut: PublishedCut | None = None
    cut_error: str | None = None
