"""Settings of one sync job, as values. The TOML config builds these."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from canalbridge.canal.server_defaults import (
    STORE_BATCH_MODE,
    STORE_BUFFER_SIZE,
    STORE_MEMUNIT,
    TRANSACTION_SIZE,
)
from canalbridge.sync.tables import TablePattern

MB = 1024 * 1024


@dataclass(frozen=True)
class CanalSettings:
    """Where the job reads from (Doris's canal.* job properties)."""

    host: str
    port: int
    destination: str
    username: str = ""
    password: str = field(default="", repr=False)
    client_id: str = "1001"
    batch_size: int = 8192  # canal.batchSize
    poll_timeout_ms: int = 1000  # how long a get may wait on the server for a full batch
    debug: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class KafkaSettings:
    """Where a job reads Canal's Kafka topic (``canal.serverMode = kafka``), as kafka-python takes it.

    ``record_format`` is Canal's ``canal.mq.flatMessage``: "flat" (true, its
    default) or "protobuf". ``transaction_markers``: whether the records carry
    transaction ends, which lets commits keep source transactions whole; only
    protobuf records on one partition do (Canal drops them when it hashes
    partitions, and flat messages never have them). ``security`` goes to
    kafka-python's consumer as given (``security_protocol``, ``sasl_*``,
    ``ssl_*``); it is never logged or shown.
    """

    bootstrap_servers: tuple[str, ...]
    topic: str
    group_id: str
    client_id: str = "canalbridge"
    record_format: str = "flat"
    transaction_markers: bool = False
    start_from: str = "earliest"  # with no committed offsets anywhere: "earliest" or "latest"
    poll_timeout_ms: int = 1000
    max_poll_records: int = 500
    # One bootstrap, offset request or offset commit; past it the link reconnects (with back-off).
    request_timeout_ms: int = 10_000
    security: Mapping[str, object] = field(default_factory=dict, repr=False)
    debug: bool = False

    @property
    def address(self) -> str:
        return ",".join(self.bootstrap_servers)

    @property
    def description(self) -> str:
        """How logs and errors name this source (never with credentials)."""
        return f"kafka {self.address} topic {self.topic}"


@dataclass(frozen=True)
class RetrySettings:
    """Exponential back-off: ``attempts`` tries in all, waits from ``initial_seconds`` doubling to ``max_seconds``."""

    attempts: int
    initial_seconds: float
    max_seconds: float


@dataclass(frozen=True)
class CommitSettings:
    """When the consumer commits, and how it retries (Doris names in comments)."""

    interval_seconds: float = 10.0  # sync_commit_interval_second
    min_events: int = 10_000  # min_sync_commit_size
    min_bytes: int = 15 * MB  # min_bytes_sync_commit
    max_bytes: int = 64 * MB  # max_bytes_sync_commit
    # How long a commit may wait for an open source transaction to end before
    # committing part of it (see README, "Commits and source transactions").
    max_source_txn_wait_seconds: float = 30.0
    # Canal's canal.instance.memory.buffer.size: the store holds at most this
    # many un-acked entries, so a larger source transaction is committed in parts.
    store_capacity: int = STORE_BUFFER_SIZE
    # Canal's canal.instance.memory.batch.mode: in MEMSIZE mode the store also
    # holds at most store_capacity x memunit bytes, and a get's batch_size counts
    # memunits rather than entries.
    store_batch_mode: str = STORE_BATCH_MODE
    store_memunit: int = STORE_MEMUNIT
    # Canal's canal.instance.transaction.size: the store takes the parser's entries
    # only when this many slots are free.
    store_transaction_size: int = TRANSACTION_SIZE
    retries: int = 5  # consecutive failed attempts before the job pauses
    retry_initial_seconds: float = 1.0
    retry_max_seconds: float = 60.0
    reconnect_attempts: int = 10
    queue_batches: int = 1024  # receiver -> consumer queue (Doris: 1024)
    # How long the Consumer waits for a channel's commit (or its queue) before it
    # calls the channel stuck and pauses the job; a MERGE into a big table may
    # legitimately take minutes.
    commit_timeout_seconds: float = 600.0
    stop_timeout_seconds: float = 60.0  # how long stopping a job waits for its threads, in all
    # Route the next transaction while a commit is applied (one commit at a time, acks in order).
    overlap: bool = True

    @property
    def commit_retry(self) -> RetrySettings:
        """A failed transaction is tried ``retries`` more times before the job pauses."""
        return RetrySettings(self.retries + 1, self.retry_initial_seconds, self.retry_max_seconds)

    @property
    def reconnect_retry(self) -> RetrySettings:
        return RetrySettings(self.reconnect_attempts, self.retry_initial_seconds, self.retry_max_seconds)


@dataclass(frozen=True)
class ChannelSettings:
    """One source table synced into one target table, or a rule that makes such channels.

    A rule (``pattern`` set) takes every table its pattern matches, each into
    the target its template names (:mod:`canalbridge.sync.routes` makes the
    channels as the tables appear). A channel a rule made names it in
    ``rule``; one that several tables share (``merged``, shards of one table)
    is named by the rule's pattern. ``schema_column`` / ``table_column`` are
    target columns that record where each row came from; ``source_in_key``
    adds them to the key (shards whose keys may collide).
    """

    source: str  # "db.table"; a rule's: its pattern
    target: str  # "lake.db.table"; a rule's: a template with {schema} and {table}
    columns: tuple[str, ...] | None = None  # target names in source column order
    key: tuple[str, ...] | None = None  # overrides the source primary key
    mode: str = "upsert"  # or "changelog"
    pattern: TablePattern | None = None  # a rule's; None: the channel of exactly ``source``
    schema_column: str | None = None
    table_column: str | None = None
    source_in_key: bool = False
    rule: str | None = None  # the pattern of the rule that made this channel
    merged: bool = False

    @property
    def keeps_every_change(self) -> bool:
        """A changelog keeps each change; an upsert target keeps the last change per key."""
        return self.mode == "changelog"

    @property
    def origin_columns(self) -> tuple[str, ...]:
        """The target columns that record each row's source schema and table, as configured."""
        return tuple(c for c in (self.schema_column, self.table_column) if c is not None)

    @property
    def filter(self) -> str:
        """This channel's (or rule's) tables in Canal's filter syntax."""
        return (self.pattern or TablePattern(self.source)).filter


@dataclass(frozen=True)
class MaintenanceSettings:
    """Table maintenance a job runs on each of its targets, between that target's commits.

    Compaction of data and delete files, then expiry of old snapshots (never
    of the one that carries the channel's position). Off for users who run
    their own (README, "Table maintenance").
    """

    enabled: bool = True
    interval_minutes: float = 60.0  # per target, from its channel's start and from its last run
    # Snapshots younger than this stay for time travel; expiry never takes the position's snapshot.
    keep_snapshots_hours: float = 24.0
    # How long the Consumer waits for a channel busy with maintenance before it calls it stuck.
    timeout_seconds: float = 3600.0


@dataclass(frozen=True)
class SchemaSettings:
    """How a job follows the source's DDL (README, "Schema changes")."""

    # DROP COLUMN: "drop" the target's column too (its data goes), or "keep" it, NULL in new rows.
    drop_column: str = "keep"
    # TRUNCATE TABLE: "apply" it (an upsert target loses every row, in one commit) or "ignore" it.
    truncate: str = "ignore"
    # RENAME TABLE of a table a channel is named for: "follow" it (the channel goes on with the table under
    # its new name, into the same target) or "ignore" it (the channel stays with the name).
    rename_table: str = "ignore"

    @property
    def drop_columns(self) -> bool:
        return self.drop_column == "drop"

    @property
    def applies_truncate(self) -> bool:
        return self.truncate == "apply"

    @property
    def follows_renames(self) -> bool:
        return self.rename_table == "follow"


@dataclass(frozen=True)
class JobSettings:
    """A whole job: one source (a Canal destination over TCP, or Canal's Kafka topic) and its channels."""

    name: str
    canal: CanalSettings | None
    channels: tuple[ChannelSettings, ...]
    commit: CommitSettings = CommitSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    kafka: KafkaSettings | None = None
    schema: SchemaSettings = SchemaSettings()

    def __post_init__(self) -> None:
        if (self.canal is None) == (self.kafka is None):
            raise ValueError(f"job {self.name}: give it either a Canal destination or a Kafka topic")

    @property
    def debug(self) -> bool:
        source = self.canal or self.kafka
        return source is not None and source.debug

    @property
    def fetch_size(self) -> int:
        """How much one read takes from the source (Canal's store counts it against its capacity)."""
        return self.canal.batch_size if self.canal is not None else 0

    @property
    def canal_filter(self) -> str:
        """Canal's subscription filter built from the channels and rules (``db\\.t,shop\\..*``).

        A job that follows renames asks for the whole schema of each table it names: Canal sends a
        renamed table's rows only if its new name is in the filter, and the new name is not known.
        """
        follows = self.schema.follows_renames
        filters = (TablePattern(f"{c.source.partition('.')[0]}.*").filter if follows and c.pattern is None
                   else c.filter for c in self.channels)
        return ",".join(dict.fromkeys(filters))

    @property
    def has_rules(self) -> bool:
        """Whether channels appear as their tables do (the job cannot list its targets before it meets them)."""
        return any(channel.pattern is not None for channel in self.channels)
