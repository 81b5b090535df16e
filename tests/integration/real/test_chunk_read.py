"""A snapshot's chunk read lands the same values as the stream: for every column type, the rows Spark reads
from MariaDB over JDBC, converted as the target converts Canal's text, equal the rows real Canal sends for
the same data, converted the same way (the hand-written extremes and random rows of the differential test,
and floats and doubles Java prints oddly)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as pb
from canalbridge.source_db import ChunkPlanner, KeyRange, SourceDb, table_columns, table_key
from canalbridge.sync.model.changes import SourceColumn
from spark_sink.chunk_read import JdbcSource, SparkChunkReader, read_chunk
from spark_sink.types import convert
from tests.infra.canal_server import CanalDestination
from tests.integration.real.entries import fetch_until, row_change
from tests.integration.real.test_differential import (
    ALL_TYPES,
    FLOATS,
    HAND_ROWS,
    RANDOM_ROWS,
    Source,
    create_table,
    float_rows,
    random_rows,
)

pytestmark = pytest.mark.real

DB = "chunkread"
USER, PASSWORD = "chunkreader", "chunkreader-secret"
# Types the differential table lacks: decimals wider than Iceberg's 38 digits (kept as Canal's text), geometry
# (its bytes), bit(1) and bit(64), tinytext; a key column named like the read's own text columns. And more of
# the types a chunk reads as values: smallint unsigned, signed mediumint, zerofill, decimal(38) (unsigned too),
# mediumtext, a latin1 varchar (ASCII only: Canal sends latin1's others as U+FFFD, docs/guide/limits.md).
OTHERS = ("CREATE TABLE others (canalbridge_c0 INT PRIMARY KEY, wide DECIMAL(65, 10), wider DECIMAL(65, 30), "
          "whole DECIMAL(60, 0), shape GEOMETRY, flag BIT(1), mask BIT(64), note TINYTEXT, "
          "small SMALLINT UNSIGNED, medium MEDIUMINT, padded INT(6) ZEROFILL, widest DECIMAL(38, 10), "
          "unsigned_widest DECIMAL(38, 38) UNSIGNED, body MEDIUMTEXT, latin VARCHAR(8) CHARACTER SET latin1)")
OTHER_ROWS = (
    f"(1, 5.0000000000, 1.5, 7, ST_GeomFromText('POINT(1 2)'), b'1', b'{'1' * 64}', 't', 65535, -8388608, 42, "
    f"{'9' * 28}.{'9' * 10}, 0.{'9' * 38}, 'line\\none', 'a b~')",
    "(2, -12345678901234567890123456789012345678901234567890.0000000001, 0, -1, NULL, b'0', b'0', '', 0, 8388607, "
    f"0, -{'9' * 28}.{'9' * 10}, 0.{'0' * 37}1, '', '')",
    f"(3, 0.0000000000, -0.{'0' * 29}1, 0, ST_GeomFromText('LINESTRING(0 0, 1 1)'), NULL, b'1{'0' * 63}', NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
)


@pytest.fixture(scope="module")
def written(canal, mariadb) -> dict[str, list[pb.RowChange]]:
    """Every row written into MariaDB, and what real Canal sent for them, by table."""
    mariadb.create_database(DB)
    mariadb.execute(*(create_table(t) for t in (ALL_TYPES, FLOATS)), OTHERS, database=DB)
    canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}\..*"))
    mariadb.execute(f"DROP USER IF EXISTS '{USER}'@'%'", f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'",
                    f"GRANT SELECT ON {DB}.* TO '{USER}'@'%'")
    rows = [*HAND_ROWS, *random_rows(len(HAND_ROWS) + 1, RANDOM_ROWS)]
    floats = float_rows(1, 200)
    with mariadb.connection(DB) as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION time_zone = '+00:00'")
        source = Source(cursor)
        for row in rows:
            source.insert(ALL_TYPES, row)
        source.insert_many(FLOATS, floats)
        cursor.execute(f"INSERT INTO others VALUES {', '.join(OTHER_ROWS)}")
    with canal.connector(DB) as connector:
        connector.subscribe()
        entries = fetch_until(connector, lambda got: len(inserts(got)) >= len(rows) + len(floats) + len(OTHER_ROWS))
    sent: dict[str, list[pb.RowChange]] = {}
    for entry in entries:
        if entry.entryType == pb.ROWDATA and entry.header.eventType == pb.INSERT:
            sent.setdefault(entry.header.tableName, []).append(row_change(entry))
    return sent


def inserts(entries: Sequence[pb.Entry]) -> list[pb.RowData]:
    return [row for e in entries if e.entryType == pb.ROWDATA and e.header.eventType == pb.INSERT
            for row in row_change(e).rowDatas]


def typed(spark, frame, columns: Sequence[tuple[str, str]]) -> dict[object, tuple]:
    """``frame``'s text columns c0... converted as the target converts them, by the first (the key); a key met
    twice fails."""
    converted = frame.select(*[convert(frame[f"c{i}"], t).alias(name) for i, (name, t) in enumerate(columns)])
    rows = converted.collect()
    by_key = {row[0]: tuple(row) for row in rows}
    assert len(by_key) == len(rows), "a row read twice"
    return by_key


@pytest.mark.parametrize("table", ["all_types", "floats", "others"])
def test_a_chunk_read_lands_the_values_the_stream_lands(spark, mariadb, written, table):
    with SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db:
        columns = [(str(name), str(column_type)) for name, column_type in db.query(
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (DB, table))]
        key = table_key(db, DB, table)
        ranges = list(ChunkPlanner(db, key, 16).ranges())
    assert len(ranges) > (0 if table == "others" else 2), "read in several ranges, one partition each"
    chunk = read_chunk(spark, JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD), key, columns, ranges)
    assert chunk.rdd.getNumPartitions() == len(ranges)

    # Canal's text, by column name (its mysqlType for JSON is MariaDB's longtext, as the table's is).
    images = [{c.name: None if c.isNull else c.value for c in row.afterColumns}
              for change in written[table] for row in change.rowDatas]
    stream = spark.createDataFrame([tuple(image[name] for name, _ in columns) for image in images],
                                   ", ".join(f"c{i} string" for i in range(len(columns))))
    from_stream, from_chunk = typed(spark, stream, columns), typed(spark, chunk, columns)
    assert len(from_chunk) == len(from_stream) == len(images)
    differences = [f"id {key_}: {name}: chunk {a!r} != stream {b!r}"
                   for key_, row in from_stream.items()
                   for (name, _), a, b in zip(columns, from_chunk[key_], row) if a != b]
    assert not differences, "\n".join(differences[:40])


def test_a_select_limit_the_server_sets_for_every_session_cuts_no_read_short(spark, mariadb, written):
    """MariaDB caps each SELECT of a session at ``sql_select_limit`` without an error: a snapshot's session sets
    its own, so that no chunk misses rows (and no re-sync's delete of its key range removes them)."""
    with SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db:
        key = table_key(db, DB, "floats")
        rows = db.query(f"SELECT COUNT(*) FROM {DB}.floats")[0][0]
    mariadb.execute("SET GLOBAL sql_select_limit = 3")
    try:
        with SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db:  # (a session opened under the cap)
            assert len(db.query(f"SELECT id FROM {DB}.floats")) == rows > 3
            assert len(table_columns(db, DB, "all_types")) == len(ALL_TYPES.columns) > 3
        chunk = read_chunk(spark, JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD), key, [("id", "int")],
                           [KeyRange(None, None)])
        assert chunk.count() == rows
    finally:
        mariadb.execute("SET GLOBAL sql_select_limit = DEFAULT")


def test_a_chunk_once_read_is_held_and_never_read_from_the_source_again(spark, mariadb, written):
    """A chunk lands as it was read between its watermarks: a change of the source after the read (the stream
    brings that one) does not reach the rows the reader holds, however often Spark computes them."""
    mariadb.execute("CREATE TABLE held (id INT PRIMARY KEY, note VARCHAR(8))",
                    "INSERT INTO held VALUES (1, 'before'), (2, 'before')", database=DB)
    with SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db:
        key = table_key(db, DB, "held")
    reader = SparkChunkReader(lambda: spark, JdbcSource(mariadb.host, mariadb.port, USER, PASSWORD))
    columns = [SourceColumn("id", "int(11)", 4, True), SourceColumn("note", "varchar(8)", 12, False)]
    read = reader.read(key, columns, [KeyRange(None, None)])
    assert read.count == 2
    mariadb.execute("UPDATE held SET note = 'after'", "INSERT INTO held VALUES (3, 'after')", database=DB)
    try:
        held = read.handle
        assert sorted(tuple(row) for row in held.collect()) == [(1, "before"), (2, "before")]
        assert held.count() == 2
    finally:
        reader.release(read.handle)
