"""Settings of one sync job, as values. The TOML config builds these.

Each configurable field declares its key with :func:`~canalbridge.sync.options.setting`:
that declaration is the key's only statement of its type, default, check and meaning.

Its length: mostly declarations, each key with its check and its line of documentation, from which
the configuration reference is written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from canalbridge.canal.server_defaults import (
    BATCH_MODES,
    STORE_BATCH_MODE,
    STORE_BUFFER_SIZE,
    STORE_MEMUNIT,
    TRANSACTION_SIZE,
)
from canalbridge.source_db.connection import SourceDb
from canalbridge.source_db.tls import TLS_MODES, SourceTls
from canalbridge.sync.model.partitions import partition_fields
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.sort_order import sort_fields
from canalbridge.sync.model.tables import TableId, TablePattern
from canalbridge.sync.options import (
    Option,
    names,
    non_empty,
    not_negative,
    one_of,
    port,
    positive,
    setting,
)

MB = 1024 * 1024
GET_SHARE_OF_STORE = 4  # a get asks for at most 1/4 of Canal's store (CanalSettings.fetch_size)


def _given() -> Any:
    """A field the loader fills from a table of its own rather than from one key. (Typed ``Any``, as
    :func:`~canalbridge.sync.options.setting` is: a bare annotation after ``name`` reads to mypy as a field
    without a default after one with a default.)"""
    return dataclasses.field()


class SourceSettings(Protocol):
    """What a job asks of its source's settings, whichever source it reads: Canal over TCP
    (:class:`~canalbridge.sync.source.canal.settings.CanalSettings`) or Canal's Kafka topic
    (:class:`~canalbridge.sync.source.kafka.settings.KafkaSettings`)."""

    KIND: ClassVar[str]  # its TOML table (``[job.<KIND>]``), and the key status shows it under
    READS: ClassVar[str]  # what the job reads, in a sentence ("Canal over TCP")
    # Whether a snapshot looks for the tables the job's rules take at each start.
    DISCOVERS_RULE_TABLES: ClassVar[bool]

    @property
    def debug(self) -> bool:
        """Whether to log every batch's summary and every row."""
        ...

    @property
    def address(self) -> str:
        """Where the source is (never with credentials)."""
        ...

    def reads(self, position: Position) -> bool:
        """Whether ``position`` is of this kind of source (positions of two kinds do not compare)."""
        ...

    @property
    def identity(self) -> tuple[object, ...]:
        """What two jobs may not share: one ack cursor per Canal destination, one offset per group's partition."""
        ...

    def already_read(self, by: str) -> str:
        """Why a second job may not read this source, which ``by`` reads already."""
        ...

    def public(self, mask: str) -> dict[str, Any]:
        """These settings as status shows them, each secret replaced by ``mask``."""
        ...

    def transactions(self) -> str:
        """Whether commits keep source (MySQL) transactions whole over this source, and why, in one line."""
        ...


def _schema_table(value: str) -> str | None:
    return None if len([part for part in value.split(".") if part]) >= 2 else f"{value!r} must name schema.table"


def _store_capacity(value: int) -> str | None:
    if value > 0 and value & (value - 1) == 0:
        return None
    return f"must be a power of 2 like canal.instance.memory.buffer.size, got {value}"


def _batch_mode(value: str) -> str | None:
    if value in BATCH_MODES:
        return None
    return f"must be one of {', '.join(BATCH_MODES)} like canal.instance.memory.batch.mode, got {value!r}"





@dataclass(frozen=True)
class RetrySettings:
    """Exponential back-off: ``attempts`` tries in all, waits from ``initial_seconds`` doubling to ``max_seconds``."""

    attempts: int
    initial_seconds: float
    max_seconds: float


@dataclass(frozen=True)
class CommitSettings:
    """When the consumer commits, and how it retries (Doris's names in the descriptions)."""

    SECTION: ClassVar[str] = "job.commit"

    interval_seconds: float = setting(10.0, doc="Doris `sync_commit_interval_second`", check=positive)
    min_events: int = setting(10_000, check=not_negative,
                              doc="Doris `min_sync_commit_size`; a warning when it exceeds Canal's store")
    min_bytes: int = setting(15 * MB, check=not_negative,
                             doc="Doris `min_bytes_sync_commit`; a warning when it exceeds Canal's store")
    max_bytes: int = setting(64 * MB, doc="Doris `max_bytes_sync_commit`", check=positive)
    # How long a commit may wait for an open source transaction to end before committing part of it.
    max_source_txn_wait_seconds: float = setting(30.0, check=positive,
                                                 doc="then a commit may take part of a source transaction")
    # The store holds at most this many un-acked entries, so a larger source transaction is committed in parts.
    store_capacity: int = setting(STORE_BUFFER_SIZE, section="job.canal", check=_store_capacity,
                                  doc="Canal's `canal.instance.memory.buffer.size` (a power of 2)")
    # In MEMSIZE mode the store also holds at most store_capacity x memunit bytes, and a get's batch_size counts
    # memunits rather than entries.
    store_batch_mode: str = setting(STORE_BATCH_MODE, section="job.canal", name="batch_mode",
                                    check=_batch_mode,
                                    doc="Canal's `canal.instance.memory.batch.mode`: `MEMSIZE` (the shipped "
                                        "`canal.properties`) or `ITEMSIZE`")
    store_memunit: int = STORE_MEMUNIT
    # The store takes the parser's entries only when this many slots are free.
    store_transaction_size: int = setting(TRANSACTION_SIZE, section="job.canal", name="transaction_size",
                                          doc="Canal's `canal.instance.transaction.size`", check=positive)
    retries: int = setting(5, doc="times a failed transaction is tried again, with back-off (5: six attempts in "
                                  "all); then the job pauses", check=not_negative)
    retry_initial_seconds: float = setting(1.0, doc="the first back-off of a retry or reconnect", check=positive)
    retry_max_seconds: float = setting(60.0, doc="the longest back-off (it doubles up to this)", check=positive)
    reconnect_attempts: int = setting(10, check=positive,
                                      doc="connection attempts in a row (to Canal, Kafka or a snapshot's source) "
                                          "before the job pauses")
    queue_batches: int = 1024  # receiver -> consumer queue (Doris: 1024)
    # A MERGE into a big table may legitimately take minutes.
    commit_timeout_seconds: float = setting(600.0, check=positive,
                                            doc="a commit (or a channel's queue) that takes longer pauses the job, "
                                                "naming the channel")
    stop_timeout_seconds: float = setting(60.0, check=positive,
                                          doc="how long pausing or stopping waits for the job's threads, in all")
    overlap: bool = setting(True, doc="read and stage the next transaction while a commit is applied (one commit "
                                      "at a time, acks in order); false waits for each commit")

    @property
    def store_share(self) -> int:
        """The most one get may take of Canal's store, in its unit (slots, or memunits in ``MEMSIZE`` mode, as
        many as there are slots): a quarter of it, so that no single batch can fill it."""
        return max(1, self.store_capacity // GET_SHARE_OF_STORE)

    @property
    def commit_retry(self) -> RetrySettings:
        """A failed transaction is tried ``retries`` more times before the job pauses."""
        return RetrySettings(self.retries + 1, self.retry_initial_seconds, self.retry_max_seconds)

    @property
    def reconnect_retry(self) -> RetrySettings:
        return RetrySettings(self.reconnect_attempts, self.retry_initial_seconds, self.retry_max_seconds)


# The table properties canalbridge keeps itself, which a channel's table_properties may not set.
OWN_PROPERTY_PREFIX = "canalbridge."
# The Iceberg formats canalbridge's writers write (format 1 has no delete files).
FORMAT_VERSIONS = ("2", "3")


def _table_properties(value: dict) -> str | None:
    for key, item in value.items():
        if not isinstance(item, (str, int, float, bool)):
            return f"{key}: must be a string, number or boolean"
        if key.startswith(OWN_PROPERTY_PREFIX):
            return f"{key}: canalbridge.* is canalbridge's own"
        if key == "format-version" and str(item) not in FORMAT_VERSIONS:
            return f"{key}: must be {' or '.join(FORMAT_VERSIONS)} (format 1 has no delete files)"
    return None


# The columns ``metadata`` names, each an upsert target's own (a changelog target has its _op, _journal...).
METADATA_COLUMNS = {"op": "_source_op", "source_time": "_source_time", "position": "_source_position",
                    "schema": "_source_schema", "table": "_source_table"}
# What ``deletes = "soft"`` adds to an upsert target.
DELETED_COLUMN, DELETED_AT_COLUMN = "_is_deleted", "_deleted_at"  # (Iceberg reserves _deleted)


def _metadata(value: list) -> str | None:
    unknown = [item for item in value if item not in METADATA_COLUMNS]
    if unknown or not value:
        return f"must name some of {', '.join(METADATA_COLUMNS)}" + (f", not {unknown[0]!r}" if unknown else "")
    return None


def _computed(value: dict) -> str | None:
    for name, expression in value.items():
        if name.startswith("_"):
            return f"{name}: names starting with _ are canalbridge's own columns"
        if not isinstance(expression, str) or not expression.strip():
            return f"{name}: must be a Spark SQL expression"
    return None


@dataclass(frozen=True)
class ChannelSettings:
    """One source table synced into one target table, or a rule that makes such channels (a ``[[job.channel]]``).

    A rule (``pattern`` set) takes every table its pattern matches, each into
    the target its template names (:mod:`canalbridge.sync.routing.rules` makes the
    channels as the tables appear). A channel a rule made names it in
    ``rule``; one that several tables share (``merged``, shards of one table)
    is named by the rule's pattern. ``schema_column`` / ``table_column`` are
    target columns that record where each row came from; ``source_in_key``
    adds them to the key (shards whose keys may collide).
    """

    SECTION: ClassVar[str] = "job.channel"

    source: str = setting(
        required=False, check=_schema_table, default_text="(this or `source_regex`)",
        doc="`db.table`; or a pattern with `*`, `?` or `[...]` in either part (`shop.*`, `shop_??.orders_[0-9]*`)")
    target: str = setting(
        check=non_empty,
        doc="`catalog.namespace.table`, once per config; for a pattern, a template (`lake.shop.{table}`, "
            "`lake.db.{schema}_{table}`)")
    columns: tuple[str, ...] | None = setting(
        None, check=names, default_text="by name",
        doc="target column names in source column order (a rename in the mapping); without it, each source column "
            "goes to the target column of its name")
    key: tuple[str, ...] | None = setting(None, check=names, default_text="the source's primary key",
                                          doc="key columns, for tables without a primary key")
    mode: str = setting("upsert", check=one_of("upsert", "changelog"),
                        doc="`upsert` keeps the last change per key; `changelog` appends every change")
    upsert_deletes: str | None = setting(
        None, check=one_of("auto", "position", "equality"), default_text="`[spark] upsert_deletes`",
        doc="this target's `[spark] upsert_deletes`: `position` for a table that readers without equality-delete "
            "support read (pyiceberg, DuckDB: see the reading page)")
    partition_by: tuple[str, ...] | None = setting(
        None, check=partition_fields, default_text="unpartitioned",
        doc="the target's partition spec, made with the target or added to it: columns and Iceberg transforms of "
            "them, `bucket(n, col)`, `truncate(w, col)`, `year(col)`, `month(col)`, `day(col)`, `hour(col)` "
            "(e.g. `[\"bucket(16, id)\", \"day(created_at)\"]`); an update that moves a row to another "
            "partition leaves one row for its key, whichever `upsert_deletes`")
    sort_by: tuple[str, ...] | None = setting(
        None, check=sort_fields, default_text="unsorted",
        doc="the target's sort order, set on the target when it differs: columns or transforms of them as in "
            "`partition_by`, each with `ASC` (the default) or `DESC` and `NULLS FIRST` or `NULLS LAST` (e.g. "
            "`[\"customer_id\", \"created_at DESC\"]`); Spark's writes sort each task's rows by it, and "
            "compaction writes each file sorted by it, which is where rows written with equality deletes are "
            "sorted")
    table_properties: dict[str, str] = setting(
        {}, check=_table_properties, default_text="none",
        doc="Iceberg table properties the target is made with, or set to when they differ "
            "(`\"write.parquet.compression-codec\" = \"zstd\"`), `format-version` among them (2, the default, "
            "or 3; a target is upgraded, never downgraded); not those canalbridge keeps (`canalbridge.*`)")
    exclude: tuple[str, ...] | None = setting(
        None, check=names, default_text="none",
        doc="target columns (as `columns` maps them) the target does not get; not a key column "
            "(docs/guide/shaping.md#columns)")
    mask: tuple[str, ...] | None = setting(
        None, check=names, default_text="none",
        doc="target columns written as an HMAC-SHA256 of their value (as text, in lower-case hex) keyed by the "
            "salt in `[spark] mask_salt_env`: the same value masks the same in every table")
    computed: dict[str, str] = setting(
        {}, check=_computed, default_text="none",
        doc="target columns made by a Spark SQL expression over the row (`order_day = \"to_date(created_at)\"`), "
            "after the row's own columns; an expression whose columns a DDL drops or renames pauses the job")
    row_filter: str | None = setting(
        None, check=non_empty, default_text="every row",
        doc="a Spark SQL predicate over the row: an upsert target holds the rows it is true of (an update that "
            "makes it false deletes the row), a changelog target the changes it is true of; the snapshot "
            "applies it too")
    metadata: tuple[str, ...] | None = setting(
        None, check=_metadata, default_text="none",
        doc="columns of an upsert target about each row's last change, by name: `op` (`_source_op`: insert, "
            "update, snapshot, delete), `source_time` (`_source_time`: when the source wrote it to its binlog), "
            "`position` (`_source_position`: binlog file:offset), `schema` and `table` (`_source_schema`, "
            "`_source_table`)")
    deletes: str = setting("hard", check=one_of("hard", "soft"),
                           doc="`soft`: an upsert target keeps a deleted row, with `_is_deleted` true and the delete's "
                               "source time in `_deleted_at`; a later insert of its key brings it back")
    pattern: TablePattern | None = None  # a rule's; None: the channel of exactly ``source``
    schema_column: str | None = setting(None, check=non_empty,
                                        doc="a target column that records each row's source schema (shards merged "
                                            "into one target)")
    table_column: str | None = setting(None, check=non_empty,
                                       doc="a target column that records each row's source table")
    source_in_key: bool = setting(False, doc="add those columns to the key, when the shards' keys may collide")
    rule: str | None = None  # the pattern of the rule that made this channel
    merged: bool = False

    @property
    def keeps_every_change(self) -> bool:
        """A changelog keeps each change; an upsert target keeps the last change per key."""
        return self.mode == "changelog"

    @property
    def shaped(self) -> bool:
        """Whether the target's columns or rows differ from the mapped source rows' (exclude, mask, computed,
        row_filter)."""
        return bool(self.exclude or self.mask or self.computed or self.row_filter)

    @property
    def soft_deletes(self) -> bool:
        """A deleted row stays in the (upsert) target, marked deleted."""
        return self.deletes == "soft"

    @property
    def change_columns(self) -> tuple[str, ...]:
        """The columns of an upsert target about each row's last change that the rows do not carry: those of
        ``metadata`` but the source's schema and table (origin columns, as ``schema_column`` and
        ``table_column``), then those of soft deletes."""
        named = [METADATA_COLUMNS[m] for m in ("op", "source_time", "position") if m in (self.metadata or ())]
        return tuple(named) + ((DELETED_COLUMN, DELETED_AT_COLUMN) if self.soft_deletes else ())

    @property
    def origin_columns(self) -> tuple[str, ...]:
        """The target columns that record each row's source schema and table, as configured."""
        return tuple(c for c in (self.schema_column, self.table_column) if c is not None)

    @property
    def filter(self) -> str:
        """This channel's (or rule's) tables in Canal's filter syntax."""
        return (self.pattern or TablePattern(self.source)).filter


@dataclass(frozen=True)
class SnapshotSettings:
    """A job's snapshot (``[job.snapshot]``): the source database the rows its tables held before the stream
    began are read from, by key ranges, while the stream runs (docs/guide/snapshot.md)."""

    SECTION: ClassVar[str] = "job.snapshot"

    host: str = setting(doc="the source database's host (the MySQL or MariaDB whose binlog Canal reads)",
                        check=non_empty)
    user: str = setting(doc="a user with SELECT on the job's tables and SELECT, INSERT, DELETE on the signal table",
                        check=non_empty)
    signal_table: str = setting(doc="`schema.table` of the signal table, in the source, where the snapshot writes "
                                    "the rows that mark each chunk in the stream", check=_schema_table)
    port: int = setting(3306, doc="the source database's port", check=port)
    password: str = setting("", doc="the user's password; prefer `password_env`", secret=True)
    # The variable's name (no secret): the loader reads the password from it.
    password_env: str | None = setting(None, check=non_empty, secret=True,
                                       doc="the environment variable that holds the password, instead of `password`")
    tls: str = setting("disable", check=one_of(*TLS_MODES),
                       doc="TLS of every connection to the source (the runner's and Spark's): `disable`, `trust` "
                           "(encrypted, any certificate), `verify-ca` (a certificate signed by `tls_ca`, or by a CA "
                           "both the system and the JVM trust), `verify-full` (that, issued for `host`); any but "
                           "`disable` refuses a server without TLS")
    tls_ca: str | None = setting(None, check=non_empty,
                                 doc="a PEM file (relative to the config file) of the CA that signed the "
                                     "source's certificate, for `verify-ca` and `verify-full`")
    mode: str = setting("initial", check=one_of("initial", "never", "only"),
                        doc="`initial`: snapshot each table of the channels whose target does not hold a finished "
                            "snapshot of it, while the stream runs; `only`: the same, then the job stops as "
                            "FINISHED instead of streaming on; `never`: stream only")
    chunk_rows: int = setting(100_000, check=positive, doc="rows per key range; a chunk, one commit, is `parallelism` "
                              "key ranges (400,000 rows with the defaults)")
    parallelism: int = setting(4, check=positive,
                               doc="key ranges read at once, one connection each: what a snapshot opens on the "
                                   "source besides its own connection")
    heartbeat: bool = setting(True, doc="when a due commit waits for a source transaction whose end the stream "
                                        "has not shown and the source is quiet, write a heartbeat row into the "
                                        "signal table: its end proves the transaction over, so the commit need not "
                                        "wait `job.commit.max_source_txn_wait_seconds` (in any `mode`)")
    land_timeout_seconds: float = setting(3600.0, check=positive,
                                          doc="how long a chunk may wait, once read, for the stream to reach it "
                                              "and its commit to land; past it the job pauses, naming the table")

    @property
    def signal(self) -> TableId:
        """The signal table."""
        return TableId.parse(self.signal_table)

    @property
    def source_tls(self) -> SourceTls:
        """How the snapshot's connections to the source use TLS."""
        return SourceTls(self.tls, self.tls_ca)

    def connect(self) -> SourceDb:
        """A new connection to the source, as the runner, verify and ``validate`` use it (opened on first use)."""
        return SourceDb(self.host, self.port, self.user, self.password, tls=self.source_tls)

    @property
    def active(self) -> bool:
        return self.mode != "never"

    @property
    def only(self) -> bool:
        """The job ends (FINISHED) once every table's snapshot is done."""
        return self.mode == "only"


@dataclass(frozen=True)
class MaintenanceSettings:
    """Table maintenance a job runs on each of its targets, between that target's commits.

    Compaction of data and delete files, then expiry of old snapshots (never
    of the one that carries the channel's position). Off for users who run
    their own (docs/guide/operations.md).
    """

    SECTION: ClassVar[str] = "job.maintenance"

    enabled: bool = setting(True, doc="compaction and snapshot expiry of each target between its commits; false "
                                      "when you run your own")
    interval_minutes: float = setting(60.0, check=positive,
                                      doc="per target, from the channel's start and from its last run")
    keep_snapshots_hours: float = setting(24.0, check=not_negative,
                                          doc="younger snapshots stay; the one holding the channel's position "
                                              "always stays")
    # How long the Consumer waits for a channel busy with maintenance before it calls it stuck.
    timeout_seconds: float = setting(3600.0, check=positive,
                                     doc="a run that takes longer pauses the job, naming the channel")


def _at_least_two(value: int) -> str | None:
    return None if value >= 2 else "must be at least 2"


def _catalog_table(value: str) -> str | None:
    if "`" not in value and (value.count(".") < 2 or any(not part for part in value.split("."))):
        return "must be catalog.namespace.table"
    return non_empty(value)


@dataclass(frozen=True)
class CutSettings:
    """Consistent cuts across a job's targets (``[job.cuts]``, docs/guide/reading.md#cuts).

    On a schedule, once every target of the job holds the same source cut,
    each gets an Iceberg tag at its snapshot of that cut and the cut log
    table gets a row naming the tag: readers who join the job's tables read
    them all at the newest cut the log names. With ``atomic``, every commit
    moves all of the job's targets in one catalog commit instead.
    """

    SECTION: ClassVar[str] = "job.cuts"

    enabled: bool = setting(True, doc="tag every target at the same source cut on a schedule, and log each such "
                                      "cut; false turns both off")
    interval_seconds: float = setting(60.0, check=positive,
                                      doc="the least time between two tagged cuts (the first comes this long "
                                          "after the job starts); each costs one metadata commit per target")
    keep: int = setting(10, check=_at_least_two,
                        doc="tagged cuts kept per target and rows in the log, the newest (at least 2: the newest "
                            "logged cut keeps its tags while the next is tagged); older tags are dropped, and "
                            "maintenance may then expire their snapshots")
    table: str | None = setting(None, check=_catalog_table,
                                default_text="`canalbridge.cuts` in the catalog of the job's first channel",
                                doc="`catalog.namespace.table` of the cut log, made when missing; jobs may share it")
    atomic: bool = setting(False, doc="publish each commit of every target in one commit of the catalog, which must "
                                      "be an Iceberg REST catalog that applies a multi-table commit atomically "
                                      "(Nessie); then no tags or log are written. Upsert targets with equality "
                                      "deletes only, without `[job.snapshot]`")


@dataclass(frozen=True)
class SchemaSettings:
    """How a job follows the source's DDL (docs/guide/schema-changes.md)."""

    SECTION: ClassVar[str] = "job.schema"

    drop_column: str = setting("keep", check=one_of("keep", "drop"),
                               doc="what a source's `DROP COLUMN` does to the target: `keep` the column (NULL in new "
                                   "rows) or `drop` it and its data")
    truncate: str = setting("ignore", check=one_of("ignore", "apply"),
                            doc="what a source's `TRUNCATE TABLE` does to an upsert target: `ignore` it or `apply` "
                                "it (every row goes, in one commit)")
    rename_table: str = setting("ignore", check=one_of("ignore", "follow"),
                                doc="what a source's `RENAME TABLE` does to the channel named for that table: "
                                    "`ignore` it (the channel stays with the name) or `follow` the table to its new "
                                    "name, into the same target")

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
    """A whole job (a ``[[job]]``): one source (a Canal destination over TCP, or Canal's Kafka topic) and its
    channels."""

    SECTION: ClassVar[str] = "job"

    name: str = setting(doc="the job's name, unique in the file", check=non_empty)
    # The `[job.canal]` or `[job.kafka]` table (JOB_SOURCES): each source package declares its settings.
    source: SourceSettings = _given()
    channels: tuple[ChannelSettings, ...] = setting(name="channel", kinds=(list,),
                                                    doc="the `[[job.channel]]` tables, at least one")
    commit: CommitSettings = setting(CommitSettings(), kinds=(dict,), default_text="(defaults)",
                                     doc="the `[job.commit]` table")
    maintenance: MaintenanceSettings = setting(MaintenanceSettings(), kinds=(dict,), default_text="(defaults)",
                                               doc="the `[job.maintenance]` table")
    schema: SchemaSettings = setting(SchemaSettings(), kinds=(dict,), default_text="(defaults)",
                                     doc="the `[job.schema]` table")
    cuts: CutSettings = setting(CutSettings(), kinds=(dict,), default_text="(defaults)",
                                doc="the `[job.cuts]` table")
    snapshot: SnapshotSettings | None = setting(None, kinds=(dict,), default_text="(no snapshot)",
                                                doc="the `[job.snapshot]` table: bring the rows the tables held "
                                                    "before the stream began")

    @property
    def debug(self) -> bool:
        return self.source.debug

    @property
    def canal_filter(self) -> str:
        """Canal's subscription filter built from the channels and rules (``db\\.t,shop\\..*``).

        A job that follows renames asks for the whole schema of each table it names: Canal sends a
        renamed table's rows only if its new name is in the filter, and the new name is not known.
        """
        follows = self.schema.follows_renames
        filters = [TablePattern(f"{TableId.parse(c.source).schema}.*").filter if follows and c.pattern is None
                   else c.filter for c in self.channels]
        if self.snapshot is not None and (self.snapshot.active or self.snapshot.heartbeat):
            filters.append(TablePattern(self.snapshot.signal_table).filter)  # its signals and heartbeats come through
        return ",".join(dict.fromkeys(filters))

    @property
    def has_rules(self) -> bool:
        """Whether channels appear as their tables do (the job cannot list its targets before it meets them)."""
        return any(channel.pattern is not None for channel in self.channels)


# The source tables of a [[job]]: the loader builds the one given into JobSettings.source.
JOB_SOURCES = (
    Option("job", "canal", (dict,), default_text="(this or `[job.kafka]`)",
           doc="the `[job.canal]` table: a Canal destination over Canal's TCP protocol"),
    Option("job", "kafka", (dict,), default_text="(this or `[job.canal]`)",
           doc="the `[job.kafka]` table: Canal's Kafka topic, instead of `[job.canal]`"),
)
CHANNEL_SOURCE_REGEX = Option("job.channel", "source_regex", (str,), check=non_empty,
                              default_text="(this or `source`)",
                              doc="instead of `source`: a regex over `schema.table` (`shop_\\d+\\.orders_\\d+`), "
                                  "matched whole and case-blind")
