"""DDL mid-stream through real Canal, with its schema history on (as Canal ships) and off.

Each DDL kind is applied to an Iceberg target in stream order, in the middle
of a workload, with rows before and after it in the same Canal batch and one
ALTER issued inside an open transaction (MariaDB commits it first); the
target then equals MariaDB, cell by cell (the column the source dropped is
kept in the target, as by default, and left out of the comparison).

With the history off, Canal reads a table's columns from the live database
when it first meets the table and again after each DDL, so those tests let
Canal catch up (the job acks what was written) before the next DDL runs;
the tests of that mode then show what happens when it cannot, and how
`canalbridge rebuild` puts back in line a table whose new key Canal
reported on rows from before its DDL. With it on
(H2 files, or tables in a MariaDB database), Canal restarts after it
parsed a whole run of DDLs that nothing acked, and the rows it parses again
carry the columns of their place in the binlog. A type change Iceberg
cannot follow pauses the job; a TRUNCATE applies when the job says so; a
daemon SIGKILLed as soon as a DDL is in the target resumes exact.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator, Sequence

import pytest

from canalbridge.devkit.entries import ColumnDef, TableDef
from canalbridge.protocol import EntryProtocol_pb2
from canalbridge.source_db import SourceDb
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.job.job import JobState, SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings, SchemaSettings, SnapshotSettings
from canalbridge.sync.snapshot.source import SnapshotSource
from spark_sink.chunk_read import JdbcSource, SparkChunkReader
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from spark_sink.table import TargetTable
from tests.daemon_process import daemon_log, running_daemon, stop
from tests.helpers import eventually
from tests.infra.canal_server import HISTORY_H2, HISTORY_MYSQL, HISTORY_OFF, CanalDestination, CanalServer
from tests.infra.memory_writer import InMemoryWriter
from tests.infra.processes import read_from
from tests.infra.sql_source import Source
from tests.integration.real.daemon_run import acked_through, assert_target_equals_source, write_daemon_config
from tests.integration.real.entries import fetch_until, row_change

pytestmark = pytest.mark.real

ROWDATA = EntryProtocol_pb2.EntryType.ROWDATA
ROW_EVENTS = (EntryProtocol_pb2.EventType.INSERT, EntryProtocol_pb2.EventType.UPDATE,
              EntryProtocol_pb2.EventType.DELETE)

COMMIT = CommitSettings(interval_seconds=0.2, min_events=1, min_bytes=1, retries=0)
SIGNALS = "canalbridge_signal"


def iceberg_job(spark, spark_settings, canal, db: str, schema: SchemaSettings | None = None, *,
                table: str = "t", tables: Sequence[str] = ()) -> SyncJob:
    settings = JobSettings(db, canal.canal_settings(db, poll_timeout_ms=50, batch_size=64),
                           tuple(ChannelSettings(f"{db}.{name}", f"lake.{db}.{name}") for name in tables or (table,)),
                           COMMIT, schema=schema or SchemaSettings())
    return SyncJob(settings, lambda channel: make_sink(spark, channel, db, spark_settings))


_IDLE = "ddl_idle"  # a Canal server needs a destination; this one reads a database nobody writes


@pytest.fixture(scope="module")
def canal_with(canal, mariadb, tmp_path_factory) -> Iterator[Callable[[str], CanalServer]]:
    """The Canal server of a schema-history mode: the session's for its own mode (history on, in MariaDB),
    otherwise one of this module's, started once (H2, as Canal ships it; or none)."""
    servers = {canal.history: canal}

    def server(history: str) -> CanalServer:
        if history not in servers:
            servers[history] = CanalServer(
                tmp_path_factory.mktemp(f"canal-{history}"), mariadb,
                [CanalDestination(_IDLE, filter_regex=rf"{_IDLE}\..*")], password="canal-client-secret",
                history=history).start()
        return servers[history]

    yield server
    for server_ in servers.values():
        if server_ is not canal:
            server_.stop()


@pytest.fixture
def history_destination(canal, mariadb, real_destination, canal_with) -> Callable[..., CanalServer]:
    """Make database NAME with ``setup`` SQL and a destination NAME reading it on the Canal server of
    ``history``; that server then reads only it (and the idle one)."""

    def make(history: str, name: str, setup: Sequence[str] = (), *,
             first: Callable[[], None] | None = None) -> CanalServer:
        """``first``: SQL run after the destination's start position was taken, before Canal first reads it."""
        server = canal_with(history)
        if server is canal and first is None:
            real_destination(name, setup=setup)
            return server
        mariadb.create_database(name)
        if setup:
            mariadb.execute(*setup, database=name)
        if server is not canal:
            for old in [old for old in server.destinations if old != _IDLE]:
                server.retire(old)
        if first is not None:
            server.stop()
        server.add_destination(CanalDestination(name, filter_regex=rf"{name}\..*"))
        if first is not None:
            first()
            server.start()
        return server

    return make


def caught_up(job: SyncJob, mariadb) -> None:
    """Until the job acked the newest transaction (Canal has read, and the target holds, all of it)."""
    assert job.acks.wait_through(EntryPosition(*mariadb.last_event_start("Xid")), 120), (
        f"{job.state} {job.fail_message} {job.stats}")


HISTORY_ON_AND_OFF = pytest.mark.parametrize("history", [HISTORY_H2, HISTORY_OFF])  # (H2: Canal's default)


@pytest.mark.spark
@HISTORY_ON_AND_OFF
def test_every_kind_of_column_change_reaches_the_target_in_stream_order(history_destination, mariadb, spark,
                                                                        spark_settings, history):
    db = f"ddl_evolve_{history}"
    canal = history_destination(history, db, setup=["CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), "
                                                    "qty INT, price DECIMAL(10,2), note VARCHAR(20))"])
    source = Source(mariadb, db, (), seed=1)
    job = iceberg_job(spark, spark_settings, canal, db)
    job.start()
    try:
        source.sql("INSERT INTO t VALUES (1, 'a', 1, 1.50, 'n1'), (2, 'b', 2, 2.00, 'n2'), (3, 'c', 3, 3.25, 'n3')")
        source.commit()
        caught_up(job, mariadb)
        steps = [
            # (the DDL, then rows in the columns it leaves, written right after it: one Canal batch)
            ("ALTER TABLE t ADD COLUMN extra INT",
             ["INSERT INTO t (id, name, qty, price, note, extra) VALUES (4, 'd', 4, 4.00, 'n4', 40)",
              "UPDATE t SET extra = 10 WHERE id = 1"]),
            ("ALTER TABLE t ADD COLUMN first_col VARCHAR(5) FIRST",
             ["INSERT INTO t (first_col, id, name) VALUES ('f5', 5, 'e')", "DELETE FROM t WHERE id = 2"]),
            ("ALTER TABLE t ADD COLUMN mid INT AFTER name", ["UPDATE t SET mid = id * 100 WHERE id <= 3"]),
            ("ALTER TABLE t DROP COLUMN note", ["INSERT INTO t (id, name, qty) VALUES (6, 'f', 6)"]),
            ("ALTER TABLE t RENAME COLUMN name TO label", ["UPDATE t SET label = 'A' WHERE id = 1"]),
            ("ALTER TABLE t CHANGE qty quantity BIGINT", ["UPDATE t SET quantity = 5000000000 WHERE id = 3"]),
            ("ALTER TABLE t MODIFY price DECIMAL(14,2)", ["INSERT INTO t (id, price) VALUES (7, 123456789012.34)"]),
            ("ALTER TABLE t ADD INDEX by_label (label)", ["UPDATE t SET label = 'E' WHERE id = 5"]),
        ]
        for index, (ddl, rows) in enumerate(steps):
            if index == len(steps) // 2:
                canal.restart()  # the history (if on) is read back; the job gets again from its ack
                # With the history off, Canal reads the table's columns afresh at the first row it meets:
                # that row must be parsed before the next DDL runs.
                source.sql("INSERT INTO t (id) VALUES (200)")
                source.commit()
                caught_up(job, mariadb)
            source.sql("INSERT INTO t (id) VALUES (%s)", 100 + index)  # a row before it, in the same batch
            if ddl.startswith("ALTER TABLE t DROP"):
                source.sql(ddl)  # inside the open transaction: MariaDB commits the INSERT first
            else:
                source.commit()
                source.sql(ddl)
            for statement in rows:
                source.sql(statement)
            source.commit()
            caught_up(job, mariadb)
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()
    final = TableDef(db, "t", (
        ColumnDef.of("first_col", "varchar(5)"), ColumnDef.of("id", "int(11)", is_key=True),
        ColumnDef.of("label", "varchar(20)"), ColumnDef.of("mid", "int(11)"), ColumnDef.of("quantity", "bigint(20)"),
        ColumnDef.of("price", "decimal(14,2)"), ColumnDef.of("extra", "int(11)")))
    assert_target_equals_source(spark, source, final, f"lake.{db}.t")
    frame = spark.table(quote_table(f"lake.{db}.t"))
    # The kept column stays where it was; every other one where MariaDB has it.
    assert frame.columns == ["first_col", "id", "label", "mid", "quantity", "price", "note", "extra"]
    assert {f.name: f.dataType.simpleString() for f in frame.schema.fields}["quantity"] == "bigint"
    kept = dict(spark.sql(f"SELECT id, note FROM {quote_table(f'lake.{db}.t')}").collect())
    assert kept[1] == "n1" and kept[6] is None  # older rows keep it, rows after the DROP leave it NULL


@pytest.mark.spark
@HISTORY_ON_AND_OFF
def test_a_primary_key_change_is_followed_and_rows_the_new_key_tells_apart_stay_apart(history_destination, mariadb,
                                                                                      spark, spark_settings, history):
    # With no restart between the ALTER and the rows.
    db = f"ddl_key_{history}"
    canal = history_destination(history, db, setup=["CREATE TABLE t (id INT NOT NULL, b INT NOT NULL, "
                                                    "note VARCHAR(10), PRIMARY KEY (id))"])
    source = Source(mariadb, db, (), seed=1)
    job = iceberg_job(spark, spark_settings, canal, db)
    job.start()
    try:
        source.sql("INSERT INTO t VALUES (1, 1, 'one'), (2, 1, 'two')")
        source.commit()
        caught_up(job, mariadb)  # Canal read these under the old key before the ALTER ran
        source.sql("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, b)")
        source.sql("INSERT INTO t VALUES (1, 2, 'one-two')")
        source.sql("UPDATE t SET note = 'two!' WHERE id = 2 AND b = 1")
        source.commit()
        caught_up(job, mariadb)
        assert job.state is JobState.RUNNING
    finally:
        job.shutdown()
    final = TableDef(db, "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("b", "int(11)", is_key=True),
                               ColumnDef.of("note", "varchar(10)")))
    assert_target_equals_source(spark, source, final, f"lake.{db}.t")
    assert spark.table(quote_table(f"lake.{db}.t")).count() == 3


@pytest.mark.spark
@pytest.mark.parametrize("history", [HISTORY_H2, HISTORY_MYSQL])
def test_rows_canal_parses_again_after_a_restart_carry_the_columns_of_their_place(history_destination, mariadb,
                                                                                  spark, spark_settings, history):
    """Every DDL kind, with rows around each, parsed by Canal and then parsed again from the last ack after
    Canal restarted: its schema history rolls back to that ack, so each row comes with the columns the
    table had where the row is in the binlog, and the job follows every change with no pause."""
    db = f"ddl_replay_{history}"
    canal = history_destination(history, db, setup=[
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), qty INT, note VARCHAR(20))",
        "CREATE TABLE k (id INT NOT NULL, b INT NOT NULL, note VARCHAR(10), PRIMARY KEY (id))",
        "CREATE TABLE o (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE g (id INT PRIMARY KEY)",
        "CREATE TABLE r (id INT PRIMARY KEY)",
        "CREATE TABLE marker (id INT PRIMARY KEY)"])
    source = Source(mariadb, db, (), seed=5)
    tables = ("t", "k", "o", "g", "r")
    schema = SchemaSettings(rename_table="follow", truncate="apply")
    job = iceberg_job(spark, spark_settings, canal, db, schema, tables=tables)
    job.start()
    try:
        source.sql("INSERT INTO t VALUES (1, 'a', 1, 'n1'), (2, 'b', 2, 'n2')")
        source.sql("INSERT INTO k VALUES (1, 1, 'one'), (2, 1, 'two')")
        source.sql("INSERT INTO o VALUES (1, 'o1')")
        source.sql("INSERT INTO g VALUES (1), (2)")
        source.sql("INSERT INTO r VALUES (1)")
        source.commit()
        caught_up(job, mariadb)
    finally:
        job.shutdown()
    canal.stop()  # (with the history in MariaDB, Canal's own writes to it would interleave with the workload)
    for statement in [
        "INSERT INTO t VALUES (3, 'c', 3, 'n3')",
        "ALTER TABLE t ADD COLUMN extra INT", "INSERT INTO t VALUES (4, 'd', 4, 'n4', 40)",
        "ALTER TABLE t ADD COLUMN first_col VARCHAR(5) FIRST", "INSERT INTO t VALUES ('f5', 5, 'e', 5, 'n5', 50)",
        "ALTER TABLE t DROP COLUMN note", "INSERT INTO t VALUES ('f6', 6, 'f', 6, 60)",
        "ALTER TABLE t RENAME COLUMN name TO label", "UPDATE t SET label = 'A' WHERE id = 1",
        "ALTER TABLE t MODIFY qty BIGINT", "UPDATE t SET qty = 5000000000 WHERE id = 3",
        "INSERT INTO k VALUES (3, 1, 'three')",
        "ALTER TABLE k DROP PRIMARY KEY, ADD PRIMARY KEY (id, b)",
        "INSERT INTO k VALUES (1, 2, 'one-two')", "UPDATE k SET note = 'two!' WHERE id = 2 AND b = 1",
        "INSERT INTO o VALUES (2, 'o2')",
        "RENAME TABLE o TO o2", "INSERT INTO o2 VALUES (3, 'o3')", "UPDATE o2 SET v = 'O1' WHERE id = 1",
        "CREATE TABLE o (id INT PRIMARY KEY, other VARCHAR(5))", "INSERT INTO o VALUES (7, 'x')",
        "INSERT INTO g VALUES (3)", "DROP TABLE g",
        "INSERT INTO r VALUES (2)", "TRUNCATE TABLE r", "INSERT INTO r VALUES (3)",
        "INSERT INTO marker VALUES (1)",
    ]:
        source.sql(statement)
        source.commit()
    end = EntryPosition(*mariadb.last_event_start("Xid"))  # the marker's commit
    canal.start()
    with canal.connector(db) as reader:  # the job's client id: Canal parses it all, and nothing is acked
        reader.subscribe()
        fetch_until(reader, lambda entries: any(e.header.tableName == "marker" and not row_change(e).isDdl
                                                for e in entries if e.entryType == ROWDATA), ack=False)
    # A stop flushes Canal's cursor, which is the last ack: the parser starts again from there. (A SIGKILL
    # would do the same, but H2 2.1.210 was seen corrupted by one: see the conftest's `canal`.)
    canal.restart()
    job = iceberg_job(spark, spark_settings, canal, db, schema, tables=tables)
    job.start()
    try:
        assert job.acks.wait_through(end, 120), f"{job.state} {job.fail_message} {job.stats}"
        assert job.state is JobState.RUNNING, job.fail_message
        assert job.stats.ddl >= 9, job.stats  # each DDL came again, and was applied in its place
    finally:
        job.shutdown()
    int_, text = "int(11)", "varchar(20)"
    expected = {
        "t": (ColumnDef.of("first_col", "varchar(5)"), ColumnDef.of("id", int_, is_key=True),
              ColumnDef.of("label", text), ColumnDef.of("qty", "bigint(20)"), ColumnDef.of("extra", int_)),
        "k": (ColumnDef.of("id", int_, is_key=True), ColumnDef.of("b", int_, is_key=True),
              ColumnDef.of("note", "varchar(10)")),
        "r": (ColumnDef.of("id", int_, is_key=True),),
    }
    for table, columns in expected.items():
        assert_target_equals_source(spark, source, TableDef(db, table, columns), f"lake.{db}.{table}")
    renamed = TableDef(db, "o2", (ColumnDef.of("id", int_, is_key=True), ColumnDef.of("v", "varchar(10)")))
    assert_target_equals_source(spark, source, renamed, f"lake.{db}.o")
    assert sorted(row[0] for row in spark.table(quote_table(f"lake.{db}.g")).collect()) == [1, 2, 3]
    if history == HISTORY_MYSQL:  # Canal's history is tables of that database, written as Canal parses DDLs
        kept = canal.history_db.execute(f"SELECT COUNT(*) FROM meta_history WHERE destination = '{db}'",
                                        database=canal.history_database)
        assert kept[0][0] >= 9, kept


@pytest.mark.parametrize("history", [HISTORY_OFF])
def test_with_the_history_off_canal_stalls_on_a_row_from_before_a_drop_column(history_destination, mariadb,
                                                                              history):
    """Canal meets a row with more columns than the live table: it logs it and retries the same position,
    and nothing of the table reaches a client."""
    db = "ddl_stall"

    def written_before_canal_reads_them() -> None:
        mariadb.execute("INSERT INTO t VALUES (1, 'a', 1)", "ALTER TABLE t DROP COLUMN qty",
                        "INSERT INTO t VALUES (2, 'b')", database=db)

    canal = history_destination(history, db, setup=["CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20), qty INT)"],
                                first=written_before_canal_reads_them)
    with canal.connector(db) as reader:
        reader.subscribe()
        stalled = eventually(lambda: read_from(canal.log_file, 0).count(
            f"column size is not match for table:{db}.t,3 vs 2") >= 2, 120)
        assert stalled, read_from(canal.log_file, 0)[-3000:]
        rows = [e for e in reader.get_without_ack(1000, 500).entries if e.entryType == ROWDATA
                and row_change(e).eventType in ROW_EVENTS]
    assert rows == []


@pytest.mark.spark
@pytest.mark.parametrize("history", [HISTORY_OFF])
def test_a_key_canal_reported_before_its_ddl_pauses_naming_the_rebuild_which_puts_the_table_back_in_line(
        history_destination, mariadb, spark, spark_settings, history):
    """With the history off, Canal attaches the key of the live table to rows from before the DDL that made it:
    the job pauses, naming `canalbridge rebuild`, which makes the target anew with the new key and snapshots the
    table into it while the other table streams on."""
    db = "ddl_rebuild"
    user = f"{db}_user"
    canal = history_destination(history, db, setup=[
        "CREATE TABLE `order` (oid INT NOT NULL, v INT NOT NULL, note VARCHAR(10), PRIMARY KEY (oid))",
        "CREATE TABLE other (id INT PRIMARY KEY, n INT)",
        "INSERT INTO `order` VALUES " + ", ".join(f"({i}, 1, 'before')" for i in range(1, 41)),
        SIGNAL_TABLE_DDL.format(table=SIGNALS)])
    mariadb.snapshot_user(user, "rebuild-secret", db, SIGNALS)
    snapshot = SnapshotSettings(host=mariadb.host, port=mariadb.port, user=user, password="rebuild-secret",
                                signal_table=f"{db}.{SIGNALS}", chunk_rows=10, parallelism=1)
    settings = JobSettings(db, canal.canal_settings(db, poll_timeout_ms=50, batch_size=64),
                           (ChannelSettings(f"{db}.order", f"lake.{db}.order"),
                            ChannelSettings(f"{db}.other", f"lake.{db}.other")), COMMIT, snapshot=snapshot)
    source_db = SnapshotSource(lambda: SourceDb(mariadb.host, mariadb.port, user, "rebuild-secret"),
                               SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, user,
                                                                          "rebuild-secret")))
    source = Source(mariadb, db, (), seed=9)

    def new_job() -> SyncJob:
        return SyncJob(settings, lambda channel: make_sink(spark, channel, db, spark_settings), snapshot=source_db)

    job = new_job()
    job.start()
    try:
        assert job.snapshot is not None and eventually(job.snapshot.finished.is_set, 180), job.fail_message
        source.sql("INSERT INTO other VALUES (1, 1)")
        source.commit()
        caught_up(job, mariadb)
    finally:
        job.shutdown()
    canal.stop()  # Canal meets the table again after its start, with the key the live table has by then
    for statement in ["UPDATE `order` SET note = 'changed' WHERE oid = 3", "INSERT INTO `order` VALUES (41, 1, 'x')",
                      "DELETE FROM `order` WHERE oid = 5", "INSERT INTO other VALUES (2, 2)",
                      "ALTER TABLE `order` DROP PRIMARY KEY, ADD PRIMARY KEY (oid, v)",
                      "INSERT INTO `order` VALUES (41, 2, 'y')", "UPDATE other SET n = 20 WHERE id = 2"]:
        source.sql(statement)
        source.commit()
    canal.start()
    job = new_job()
    job.start()
    try:
        assert job.wait_state(JobState.PAUSED, 120), f"{job.state} {job.stats}"
        message = job.fail_message.text
        assert "keyed by (oid, v)" in message and f"canalbridge rebuild {db} {db}.order" in message, message
        job.rebuild(f"{db}.order")
        assert job.state is JobState.RUNNING
        # Changes of both tables while the target is made anew and read again.
        for statement in ["INSERT INTO other VALUES (3, 3)", "INSERT INTO `order` VALUES (42, 7, 'during')",
                          "UPDATE `order` SET note = 'during' WHERE oid = 10 AND v = 1",
                          "DELETE FROM `order` WHERE oid = 41 AND v = 1"]:
            source.sql(statement)
            source.commit()
        assert job.snapshot is not None and eventually(
            lambda: job.snapshot.finished.is_set() or job.state is not JobState.RUNNING, 180), job.fail_message
        assert job.state is JobState.RUNNING, job.fail_message
        caught_up(job, mariadb)
    finally:
        job.shutdown()
    int_ = "int(11)"
    assert_target_equals_source(spark, source, TableDef(db, "order", (
        ColumnDef.of("oid", int_, is_key=True), ColumnDef.of("v", int_, is_key=True),
        ColumnDef.of("note", "varchar(10)"))), f"lake.{db}.order")
    assert_target_equals_source(spark, source, TableDef(db, "other", (
        ColumnDef.of("id", int_, is_key=True), ColumnDef.of("n", int_))), f"lake.{db}.other")
    properties = TargetTable(spark, f"lake.{db}.order").properties()
    assert properties["canalbridge.primary-key"] == '["oid", "v"]', properties


@pytest.mark.spark
def test_a_type_change_iceberg_cannot_follow_pauses_naming_table_ddl_and_position(real_destination, canal, mariadb,
                                                                                 spark, spark_settings):
    db = "ddl_narrow"
    real_destination(db, setup=["CREATE TABLE t (id INT PRIMARY KEY, qty INT)"])
    job = iceberg_job(spark, spark_settings, canal, db)
    job.start()
    try:
        mariadb.execute("INSERT INTO t VALUES (1, 10)", database=db)
        caught_up(job, mariadb)
        mariadb.execute("ALTER TABLE t MODIFY qty VARCHAR(10)", database=db)
        at = EntryPosition(*mariadb.last_event_start("Query"))
        mariadb.execute("INSERT INTO t VALUES (2, 'twenty')", database=db)
        assert job.wait_state(JobState.PAUSED, 120), f"{job.state} {job.stats}"
        message = job.fail_message.text
        assert f"table {db}.t: cannot apply the DDL 'ALTER TABLE t MODIFY qty VARCHAR(10)' at {at}" in message, message
        assert "column qty is int in the target and would become string" in message, message
        assert job.acks.position is not None and job.acks.position < at  # nothing from the DDL on acked
    finally:
        job.shutdown()
    rows = spark.table(quote_table(f"lake.{db}.t")).collect()
    assert [tuple(row) for row in rows] == [(1, 10)]


@pytest.mark.parametrize("history", [HISTORY_OFF, HISTORY_H2])
def test_rows_canal_parses_after_a_rename_carry_the_new_names_and_pause_the_job(history_destination, mariadb,
                                                                               history):
    """With the history off; or on, but in its first run: it starts from the live table's columns."""
    db = f"ddl_late_{history}"

    def written_before_canal_reads_them() -> None:
        mariadb.execute("INSERT INTO t VALUES (1, 'a')", "ALTER TABLE t CHANGE note remark VARCHAR(20)",
                        "INSERT INTO t VALUES (2, 'b')", database=db)

    canal = history_destination(history, db, setup=["CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20))"],
                                first=written_before_canal_reads_them)
    writer = InMemoryWriter(f"{db}.t", columns=("id", "note"))
    settings = JobSettings(db, canal.canal_settings(db, poll_timeout_ms=50),
                           (ChannelSettings(f"{db}.t", f"lake.{db}.t"),), CommitSettings(retries=0))
    job = SyncJob(settings, lambda channel: ChannelSink.of(writer))
    job.start()
    try:
        assert job.wait_state(JobState.PAUSED, 120), f"{job.state} {job.stats}"
        message = job.fail_message.text
    finally:
        job.shutdown()
    assert "row columns (id, remark) are not the target's (id, note)" in message, message
    assert writer.rows == {} and job.acks.position is None  # row 1, written as `note`, was not mapped by position


@pytest.mark.spark
def test_a_truncate_the_job_applies_empties_the_target_between_the_rows_around_it(real_destination, canal, mariadb,
                                                                                 spark, spark_settings):
    db = "ddl_truncate"
    real_destination(db, setup=["CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))"])
    source = Source(mariadb, db, (), seed=3)
    job = iceberg_job(spark, spark_settings, canal, db, SchemaSettings(truncate="apply"))
    job.start()
    try:
        source.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        source.commit()
        caught_up(job, mariadb)
        source.sql("INSERT INTO t VALUES (3, 'c')")  # in the same Canal batch as the TRUNCATE
        source.sql("TRUNCATE TABLE t")
        source.sql("INSERT INTO t VALUES (4, 'd')")
        source.commit()
        caught_up(job, mariadb)
    finally:
        job.shutdown()
    table = TableDef(db, "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(20)")))
    assert_target_equals_source(spark, source, table, f"lake.{db}.t")
    assert [row[0] for row in spark.table(quote_table(f"lake.{db}.t")).collect()] == [4]


@pytest.mark.spark
@pytest.mark.faults
@pytest.mark.timeout(900)
def test_a_daemon_killed_once_a_ddl_is_in_the_target_resumes_exact(real_destination, canal, mariadb, spark,
                                                                   spark_settings, tmp_path):
    """SIGKILL as soon as the DDL's commit shows in the target: mostly before its ack, which then replays it. The
    target is partitioned by a bucket of its key, which a later DDL widens, and takes position deletes (the real
    shaping test writes equality deletes into a partitioned target)."""
    db = "ddl_kill"
    real_destination(db, setup=["CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))"])
    target = f"lake.{db}.t"
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, db, spark_settings.warehouse,
                                 f'[[job.channel]]\nsource = "{db}.t"\ntarget = "{target}"\n'
                                 f'partition_by = ["bucket(4, id)"]\nupsert_deletes = "position"')
    source = Source(mariadb, db, (), seed=2)

    def acked_all() -> bool:
        return acked_through(config, EntryPosition(*mariadb.last_event_start("Xid")))

    def columns() -> list[str]:
        spark.sql(f"REFRESH TABLE {quote_table(target)}")  # the daemon, not this session, writes it
        return spark.table(quote_table(target)).columns

    with running_daemon(config) as daemon:
        source.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        source.commit()
        assert eventually(lambda: daemon.poll() is not None or acked_all(), 300), daemon_log(config)[-3000:]
        source.sql("ALTER TABLE t ADD COLUMN qty INT AFTER id")
        source.sql("INSERT INTO t VALUES (3, 30, 'c')")
        source.commit()
        assert eventually(lambda: daemon.poll() is not None or "qty" in columns(), 300), daemon_log(config)[-3000:]
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(60)
    with running_daemon(config) as daemon:
        source.sql("UPDATE t SET qty = 10 WHERE id = 1")
        source.sql("ALTER TABLE t CHANGE name label VARCHAR(40)")
        source.sql("INSERT INTO t VALUES (4, 40, 'd')")
        source.sql("ALTER TABLE t MODIFY id BIGINT")
        source.sql("INSERT INTO t VALUES (5000000000, 50, 'e')")
        source.sql("UPDATE t SET label = 'B' WHERE id = 2")
        source.commit()
        assert eventually(lambda: daemon.poll() is not None or acked_all(), 300), daemon_log(config)[-3000:]
        stop(daemon, config)
    assert columns() == ["id", "qty", "label"]
    assert [str(field) for field in TargetTable(spark, target).partition_fields()] == ["bucket(4, id)"]
    final = TableDef(db, "t", (ColumnDef.of("id", "bigint(20)", is_key=True), ColumnDef.of("qty", "int(11)"),
                               ColumnDef.of("label", "varchar(40)")))
    assert_target_equals_source(spark, source, final, target)


@pytest.mark.spark
def test_a_channel_follows_its_table_through_a_rename_and_a_restart(real_destination, canal, mariadb, spark,
                                                                    spark_settings):
    db = "ddl_rename"
    real_destination(db, setup=["CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(20))"])
    follow = SchemaSettings(rename_table="follow")
    job = iceberg_job(spark, spark_settings, canal, db, follow, table="orders")
    job.start()
    try:
        mariadb.execute("INSERT INTO orders VALUES (1, 'a'), (2, 'b')", database=db)
        caught_up(job, mariadb)  # (with Canal's schema history off, it must parse these before the rename)
        mariadb.execute("RENAME TABLE orders TO orders_v2", "INSERT INTO orders_v2 VALUES (3, 'c')",
                        "UPDATE orders_v2 SET name = 'A' WHERE id = 1",
                        "CREATE TABLE orders (id INT PRIMARY KEY, other VARCHAR(5))",  # another table, same name
                        "INSERT INTO orders VALUES (7, 'x')", database=db)
        caught_up(job, mariadb)
    finally:
        job.shutdown()
    job = iceberg_job(spark, spark_settings, canal, db, follow, table="orders")  # a new run reads the name back
    job.start()
    try:
        mariadb.execute("ALTER TABLE orders_v2 ADD COLUMN qty INT", "INSERT INTO orders_v2 VALUES (4, 'd', 4)",
                        "DELETE FROM orders_v2 WHERE id = 2", database=db)
        caught_up(job, mariadb)
        assert job.state is JobState.RUNNING, job.fail_message
    finally:
        job.shutdown()
    final = TableDef(db, "orders_v2", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(20)"),
                                       ColumnDef.of("qty", "int(11)")))
    assert_target_equals_source(spark, Source(mariadb, db, (), seed=4), final, f"lake.{db}.orders")
