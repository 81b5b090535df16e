"""Settings of one sync job, as values. The TOML config builds these.

Each configurable field declares its key with :func:`~canalbridge.sync.options.setting`:
that declaration is the key's only statement of its type, default, check and meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from canalbridge.canal.server_defaults import (
    BATCH_MODES,
    STORE_BATCH_MODE,
    STORE_BUFFER_SIZE,
    STORE_MEMUNIT,
    TRANSACTION_SIZE,
)
from canalbridge.source_db.connection import SourceDb
from canalbridge.source_db.tls import TLS_MODES, SourceTls
from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.options import (
    Option,
    java_short,
    names,
    non_empty,
    not_negative,
    one_of,
    port,
    positive,
    setting,
)

MB = 1024 * 1024
GET_SHARE_OF_STORE = 4  # a get asks for at most 1/4 of Canal's store (JobSettings.fetch_size)


def _bootstrap(value: str | list) -> str | None:
    servers = value.split(",") if isinstance(value, str) else value
    if not servers or not all(isinstance(s, str) and s.strip().rpartition(":")[2].isdigit() for s in servers):
        return f"must be host:port, or a list of them, got {value!r}"
    return None


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
class CanalSettings:
    """Where the job reads from: a Canal server's destination over its TCP protocol (Doris's canal.* job
    properties). Canal's store settings, which decide when commits are cut, are kept in :class:`CommitSettings`."""

    SECTION: ClassVar[str] = "job.canal"

    host: str = setting(doc="the Canal server's host", check=non_empty)
    port: int = setting(doc="the Canal server's port (`canal.port`)", check=port)
    destination: str = setting(doc="the Canal destination (instance) to read; one job per host:port and "
                                   "destination", check=non_empty)
    username: str = setting("", doc="Canal's `canal.user`")
    password: str = setting("", doc="Canal's password (`canal.passwd` holds its SHA1(SHA1)); prefer "
                                    "`password_env`", secret=True)
    # The variable's name (no secret): the loader reads the password from it.
    password_env: str | None = setting(None, check=non_empty, secret=True,  # (hidden in errors: a password typed here)
                                       doc="the environment variable that holds the password, instead of `password`")
    client_id: str = setting("1001", doc="the Canal client id (a Java short)", check=java_short)
    batch_size: int = setting(8192, check=positive,
                              doc="a getWithoutAck's size (Doris `canal.batchSize`): entries in `ITEMSIZE` mode, KB "
                                  "in `MEMSIZE` mode; at most a quarter of `store_capacity` is asked for (in `MEMSIZE` "
                                  "mode, and no more KB than a quarter of its slots take at the last batch's entry "
                                  "size), so that no get can fill Canal's store in the middle of a transaction")
    poll_timeout_ms: int = setting(1000, doc="how long a get may wait on the server for a full batch",
                                   check=positive)
    debug: bool = setting(False, doc="log a summary of every batch and every row (Doris's `printSummary`)")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class KafkaSettings:
    """Where a job reads Canal's Kafka topic (``canal.serverMode = kafka``), as kafka-python takes it, instead of
    ``[job.canal]``.

    ``record_format`` is Canal's ``canal.mq.flatMessage``: "flat" (true, its
    default) or "protobuf". ``transaction_markers``: whether the records carry
    transaction ends, which lets commits keep source transactions whole; only
    protobuf records on one partition do (Canal drops them when it hashes
    partitions, and flat messages never have them). ``security`` goes to
    kafka-python's consumer as given (``security_protocol``, ``sasl_*``,
    ``ssl_*``); it is never logged or shown.
    """

    SECTION: ClassVar[str] = "job.kafka"

    bootstrap_servers: tuple[str, ...] = setting(
        doc='the brokers, as `"h:p,h:p"` or a list', kinds=(str, list), check=_bootstrap)
    topic: str = setting(doc="Canal's topic (`canal.mq.topic`)", check=non_empty)
    group_id: str = setting(doc="the consumer group that holds the committed offsets; one job per topic and group",
                            check=non_empty, required=False, default_text="`canalbridge-<job name>`")
    client_id: str = setting("canalbridge", doc="kafka-python's client id", check=non_empty)
    record_format: str = setting("flat", name="format", check=one_of("flat", "protobuf"),
                                 doc="Canal's `canal.mq.flatMessage`: `flat` (true, Canal's default) or `protobuf` "
                                     "(false)")
    transaction_markers: bool = setting(
        False, default_text="true for `protobuf`, false for `flat`",
        doc="whether the records carry transaction ends (protobuf on a topic Canal does not hash); false for "
            "hashed topics; flat messages have none")
    start_from: str = setting("earliest", check=one_of("earliest", "latest"),
                              doc="where a partition starts when neither the group nor any target holds an offset "
                                  "for it")
    poll_timeout_ms: int = setting(1000, doc="how long one poll may wait", check=positive)
    max_poll_records: int = setting(500, doc="records one poll takes at most", check=positive)
    # One bootstrap, offset request or offset commit; past it the link reconnects (with back-off).
    request_timeout_ms: int = setting(10_000, check=positive,
                                      doc="a bootstrap, offset request or offset commit; past it the job reconnects "
                                          "with back-off")
    security: Mapping[str, object] = setting(
        {}, secret=True, doc="kafka-python's security settings: the `[job.kafka.security]` table below")
    debug: bool = setting(False, doc="log every poll's summary and every row")

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
    retries: int = setting(5, doc="failed transactions retried with back-off, then the job pauses",
                           check=not_negative)
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
    def commit_retry(self) -> RetrySettings:
        """A failed transaction is tried ``retries`` more times before the job pauses."""
        return RetrySettings(self.retries + 1, self.retry_initial_seconds, self.retry_max_seconds)

    @property
    def reconnect_retry(self) -> RetrySettings:
        return RetrySettings(self.reconnect_attempts, self.retry_initial_seconds, self.retry_max_seconds)


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
    chunk_rows: int = setting(100_000, check=positive, doc="rows per key range")
    parallelism: int = setting(4, check=positive,
                               doc="key ranges read at once, one connection each: what a snapshot opens on the "
                                   "source besides its own connection")
    land_timeout_seconds: float = setting(3600.0, check=positive,
                                          doc="how long a chunk may wait, once read, for the stream to reach it "
                                              "and its commit to land; past it the job pauses, naming the table")

    @property
    def signal(self) -> tuple[str, str]:
        """The signal table as (schema, table)."""
        schema, _, table = self.signal_table.partition(".")
        return schema, table

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
    canal: CanalSettings | None = setting(
        kinds=(dict,), required=False, default_text="(this or `[job.kafka]`)",
        doc="the `[job.canal]` table: a Canal destination over Canal's TCP protocol")
    channels: tuple[ChannelSettings, ...] = setting(name="channel", kinds=(list,),
                                                    doc="the `[[job.channel]]` tables, at least one")
    commit: CommitSettings = setting(CommitSettings(), kinds=(dict,), default_text="(defaults)",
                                     doc="the `[job.commit]` table")
    maintenance: MaintenanceSettings = setting(MaintenanceSettings(), kinds=(dict,), default_text="(defaults)",
                                               doc="the `[job.maintenance]` table")
    kafka: KafkaSettings | None = setting(None, kinds=(dict,), default_text="(this or `[job.canal]`)",
                                          doc="the `[job.kafka]` table: Canal's Kafka topic, instead of `[job.canal]`")
    schema: SchemaSettings = setting(SchemaSettings(), kinds=(dict,), default_text="(defaults)",
                                     doc="the `[job.schema]` table")
    snapshot: SnapshotSettings | None = setting(None, kinds=(dict,), default_text="(no snapshot)",
                                                doc="the `[job.snapshot]` table: bring the rows the tables held "
                                                    "before the stream began")

    def __post_init__(self) -> None:
        if (self.canal is None) == (self.kafka is None):
            raise ValueError(f"job {self.name}: give it either a Canal destination or a Kafka topic")

    @property
    def debug(self) -> bool:
        source = self.canal or self.kafka
        return source is not None and source.debug

    @property
    def fetch_size(self) -> int:
        """How much one get asks of Canal: ``batch_size``, but at most a quarter of its store (in the store's
        unit, entries or memunits), so that no single batch can fill the store in the middle of a transaction
        and force a split (Kafka: 0, no store)."""
        if self.canal is None:
            return 0
        return max(1, min(self.canal.batch_size, self.commit.store_capacity // GET_SHARE_OF_STORE))

    @property
    def canal_filter(self) -> str:
        """Canal's subscription filter built from the channels and rules (``db\\.t,shop\\..*``).

        A job that follows renames asks for the whole schema of each table it names: Canal sends a
        renamed table's rows only if its new name is in the filter, and the new name is not known.
        """
        follows = self.schema.follows_renames
        filters = [TablePattern(f"{c.source.partition('.')[0]}.*").filter if follows and c.pattern is None
                   else c.filter for c in self.channels]
        if self.snapshot is not None and self.snapshot.active:  # its signals come through the stream
            filters.append(TablePattern(self.snapshot.signal_table).filter)
        return ",".join(dict.fromkeys(filters))

    @property
    def has_rules(self) -> bool:
        """Whether channels appear as their tables do (the job cannot list its targets before it meets them)."""
        return any(channel.pattern is not None for channel in self.channels)


CHANNEL_SOURCE_REGEX = Option("job.channel", "source_regex", (str,), check=non_empty,
                              default_text="(this or `source`)",
                              doc="instead of `source`: a regex over `schema.table` (`shop_\\d+\\.orders_\\d+`), "
                                  "matched whole and case-blind")
# kafka-python's consumer settings a job may pass, by kafka-python's names; a *_password may come from *_password_env.
KAFKA_SECURITY = tuple(Option("job.kafka.security", name, kinds, check=check, doc=doc, secret="password" in name)
                       for name, kinds, check, doc in (
    ("security_protocol", (str,), one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "how to reach the brokers"),
    ("sasl_mechanism", (str,), one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"),
     "the SASL mechanism"),
    ("sasl_plain_username", (str,), None, "the SASL user"),
    ("sasl_plain_password", (str,), None, "the SASL password; prefer `sasl_plain_password_env`"),
    ("sasl_plain_password_env", (str,), non_empty, "the environment variable that holds the SASL password"),
    ("sasl_kerberos_service_name", (str,), non_empty, "Kerberos service name"),
    ("sasl_kerberos_domain_name", (str,), non_empty, "Kerberos domain name"),
    ("ssl_cafile", (str,), non_empty, "CA certificate file"),
    ("ssl_certfile", (str,), non_empty, "client certificate file"),
    ("ssl_keyfile", (str,), non_empty, "client key file"),
    ("ssl_password", (str,), None, "the client key's password; prefer `ssl_password_env`"),
    ("ssl_password_env", (str,), non_empty, "the environment variable that holds the client key's password"),
    ("ssl_crlfile", (str,), non_empty, "certificate revocation list file"),
    ("ssl_check_hostname", (bool,), None, "check the broker's host name against its certificate"),
    ("ssl_ciphers", (str,), non_empty, "allowed ciphers, OpenSSL's syntax"),
))
