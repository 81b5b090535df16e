"""A snapshot's chunk read from the source over JDBC: one Spark partition per key range, as the stream's rows.

Spark's JDBC source runs ``SELECT ... FROM (the columns as the stream's
conversion takes them, :mod:`spark_sink.source_text`) WHERE <key range>`` once per range, each on
its own connection, so the ranges of one read are read in parallel (a
cluster's executors each read theirs). ``partitionColumn``/``lowerBound``
would only set strides, never filter: the ranges are given as predicates.
Each connection first sets the session up as the planner's
(:data:`~canalbridge.source_db.chunks.SESSION_SETUP`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, cast

from canalbridge.source_db.chunks import SESSION_SETUP, KeyRange, chunk_predicate, quote
from canalbridge.source_db.keys import TableKey
from canalbridge.source_db.tls import NO_TLS, SourceTls
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.settings import SnapshotSettings
from canalbridge.sync.snapshot.source import ReaderLostError, ReadRows
from spark_sink.session import checkpoint_held, release_checkpoint, session_alive
from spark_sink.source_text import canal_text, source_select

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DRIVER = "org.mariadb.jdbc.Driver"
CONNECT_TIMEOUT_MS = 10_000
READ_TIMEOUT_MS = 600_000  # one range's read: a server that stops answering fails the read, not hangs it


@dataclass(frozen=True)
class JdbcSource:
    """Where a snapshot reads the source: host, port and user (the password never shows in repr)."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    tls: SourceTls = NO_TLS

    @classmethod
    def of(cls, settings: SnapshotSettings) -> JdbcSource:
        """The source a job's ``[job.snapshot]`` names."""
        return cls(settings.host, settings.port, settings.user, settings.password, settings.source_tls)

    @property
    def url(self) -> str:
        # jdbc:mysql picks Spark's MySQL dialect (backquoted names); permitMysqlScheme lets MariaDB's driver
        # take it. Server-side prepared statements: the binary protocol carries FLOAT and DOUBLE as values.
        return f"jdbc:mysql://{self.host}:{self.port}/?permitMysqlScheme&useServerPrepStmts=true"

    def properties(self) -> dict[str, str]:
        """The driver's connection properties: the login, and TLS (the modes are Connector/J's own names)."""
        properties = {"user": self.user, "password": self.password, "driver": DRIVER, "sslMode": self.tls.mode}
        if self._server_certificates is not None:
            properties["serverSslCert"] = self._server_certificates
        return properties

    @cached_property
    def _server_certificates(self) -> str | None:
        # The certificates themselves, not the file's path: a cluster's executors open the connections, and the
        # file is on the daemon's machine (without one: the JVM's trusted CAs). Read once; a failed read is not
        # kept, so the next chunk's read tries again.
        if not (self.tls.verifies and self.tls.ca):
            return None
        return Path(self.tls.ca).read_text(encoding="ascii")


def read_chunk(spark: SparkSession, source: JdbcSource, key: TableKey, columns: Sequence[tuple[str, str]],
               ranges: Sequence[KeyRange], where: str | None = None) -> DataFrame:
    """The rows of ``key``'s table in ``ranges`` (one partition each) that ``where`` takes (a checked filter;
    None: all), as columns ``c0``... for ``columns`` (name, MySQL type), in that order."""
    prefix = _text_prefix([name for name, _ in columns])
    texts = ", ".join(f"{source_select(name, mysql_type)} AS {prefix}{index}"
                      for index, (name, mysql_type) in enumerate(columns))
    keys = ", ".join(quote(name) for name in key.names)
    # The filter inside: it may name any of the table's columns, not only those selected.
    filtered = f" WHERE ({where})" if where is not None else ""
    query = f"(SELECT {texts}, {keys} FROM {key.sql_table}{filtered}) AS canalbridge_chunk"
    frame = spark.read.jdbc(
        source.url, query, predicates=[chunk_predicate(key.columns, keys_) for keys_ in ranges],
        properties={**source.properties(), "sessionInitStatement": SESSION_SETUP,
                    "connectTimeout": str(CONNECT_TIMEOUT_MS), "socketTimeout": str(READ_TIMEOUT_MS)})
    return frame.select(*[canal_text(frame[f"{prefix}{index}"], mysql_type).alias(f"c{index}")
                          for index, (_, mysql_type) in enumerate(columns)])


class SparkChunkReader:
    """A snapshot's :class:`~canalbridge.sync.snapshot.runner.ChunkReader` through Spark: the ranges read in
    parallel and held by Spark (``localCheckpoint``: memory, then the executors' disks) until the chunk lands,
    so that applying it never reads the source again."""

    def __init__(self, spark: Callable[[], SparkSession], source: JdbcSource) -> None:
        self._spark = spark  # the session to read with now (one whose JVM died is replaced)
        self.source = source

    def read(self, key: TableKey, columns: Sequence[SourceColumn], ranges: Sequence[KeyRange],
             where: str | None = None) -> ReadRows:
        if not ranges:  # (a mark: a snapshot's progress landing with no row, and no connection for it)
            empty = self._spark().createDataFrame([], ", ".join(f"c{index} string" for index in range(len(columns))))
            return ReadRows(empty, 0)
        spark = self._spark()
        try:
            frame = read_chunk(spark, self.source, key, [(c.name, c.mysql_type) for c in columns], ranges, where)
            # Lazy: the count is the read, one Spark job that reads, holds and counts (an eager checkpoint reads in
            # a job of its own, and the count would be a second).
            held = frame.localCheckpoint(eager=False)
            return ReadRows(held, held.count())
        except Exception as exc:
            if not session_alive(spark):  # (the next read is on a new session)
                raise ReaderLostError(f"Spark's JVM went away during the read: {exc}") from exc
            raise

    def release(self, rows: object) -> None:
        release_checkpoint(cast("DataFrame", rows))

    def holds(self, rows: object) -> bool:
        return checkpoint_held(cast("DataFrame", rows))


def _text_prefix(names: Sequence[str]) -> str:
    """A prefix for the text columns' names that no source column starts with (the key's columns are read too)."""
    prefix = "canalbridge_c"
    while any(name.lower().startswith(prefix) for name in names):
        prefix += "_"
    return prefix
