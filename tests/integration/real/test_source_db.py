"""A snapshot's reads of the source (real MariaDB): each table's key, and key-range chunks that hold every
row exactly once, up to the last key taken at the start. Bad settings get errors that name what to fix."""

from __future__ import annotations

import secrets

import pytest

from canalbridge.source_db import (
    ChunkPlanner,
    KeyRange,
    SourceDb,
    SourceDbAccessError,
    SourceDbAuthError,
    SourceDbConnectionError,
    SourceDbError,
    TableKey,
    TableKeyError,
    check_filter,
    checked_filter,
    chunk_predicate,
    table_key,
    table_rows_estimate,
)
from canalbridge.source_db.chunks import quote
from tests.infra.processes import LOOPBACK, free_port

pytestmark = pytest.mark.real

DB = "snapsource"
READER, READER_PASSWORD = "snapreader", f"pw-{secrets.token_hex(8)}"

TABLES = (
    "CREATE TABLE ints (id BIGINT PRIMARY KEY, v INT)",
    # A case-insensitive collation, and strings that a literal must escape.
    "CREATE TABLE strs (k VARCHAR(32) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
    "CREATE TABLE pairs (a INT, b VARCHAR(8), v INT, PRIMARY KEY (b, a))",  # key order is not column order
    "CREATE TABLE nokey (a INT NOT NULL, b INT NOT NULL)",
    "CREATE TABLE uniq (a INT NOT NULL, b INT NOT NULL, UNIQUE KEY (b, a))",
    "CREATE TABLE times (t DATETIME(6) PRIMARY KEY, v INT)",
    "CREATE TABLE money (m DECIMAL(12, 2) PRIMARY KEY, v INT)",
    "CREATE TABLE blobs (b VARBINARY(8) PRIMARY KEY, v INT)",
    "CREATE TABLE latin (k VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_swedish_ci PRIMARY KEY)",
    "CREATE TABLE floats (f FLOAT PRIMARY KEY)",
    "CREATE TABLE enums (e ENUM('b', 'a') PRIMARY KEY)",
    "CREATE TABLE nullable (a INT NULL, b INT NOT NULL)",
    "CREATE TABLE empty (id INT PRIMARY KEY)",
    "CREATE TABLE hidden (id INT PRIMARY KEY)",
)
STRINGS = ["a", "B", "c", "it's", "back\\slash", "100%", "émoji 🐬", "Z", "zz", "", " lead", "_"]


@pytest.fixture(scope="module")
def source(mariadb):
    mariadb.create_database(DB)
    mariadb.execute(*TABLES, database=DB)
    ids = sorted(set(range(1, 2000, 3)) | {5, 7, 11})
    mariadb.execute("INSERT INTO ints VALUES " + ", ".join(f"({i}, {i})" for i in ids), database=DB)
    with mariadb.connection(DB) as conn, conn.cursor() as cursor:
        cursor.executemany("INSERT INTO strs VALUES (%s, 1)", [(s,) for s in STRINGS])
        cursor.executemany("INSERT INTO pairs VALUES (%s, %s, 1)",
                           [(a, b) for a in range(40) for b in ("x", "y", "it's", "")])
        cursor.executemany("INSERT INTO uniq VALUES (%s, %s)", [(a, a % 7) for a in range(30)])
        cursor.executemany("INSERT INTO times VALUES (%s, 1)", [(f"2024-01-0{d} 0{h}:00:00.{h}5",) for d in range(1, 8)
                                                                for h in range(10)])
        cursor.executemany("INSERT INTO money VALUES (%s, 1)", [(f"{m / 4:.2f}",) for m in range(-40, 40)])
        cursor.executemany("INSERT INTO blobs VALUES (%s, 1)", [(bytes([b, 0, 255 - b]),) for b in range(0, 256, 3)])
        cursor.executemany("INSERT INTO latin VALUES (%s)", [(s,) for s in ["a", "B", "é", "É" + "x", "z", "ß"]])
    mariadb.execute(f"DROP USER IF EXISTS '{READER}'@'%'",
                    f"CREATE USER '{READER}'@'%' IDENTIFIED BY '{READER_PASSWORD}'",
                    *(f"GRANT SELECT ON {DB}.{table} TO '{READER}'@'%'"
                      for table in ("ints", "strs", "pairs", "nokey", "uniq", "nullable", "empty", "times", "money",
                                    "blobs", "latin", "floats", "enums")))
    with SourceDb(mariadb.host, mariadb.port, READER, READER_PASSWORD) as db:
        yield db


def keys_in(db: SourceDb, key: TableKey, keys: KeyRange) -> list[tuple]:
    columns = ", ".join(quote(c) for c in key.names)
    return db.query(f"SELECT {columns} FROM {key.sql_table} WHERE {chunk_predicate(key.columns, keys)} "
                    f"ORDER BY {columns}")


@pytest.mark.parametrize(("table", "size"), [("ints", 64), ("ints", 1), ("strs", 5), ("pairs", 7), ("times", 9),
                                            ("money", 11), ("blobs", 4), ("latin", 2)])
def test_the_chunks_hold_every_row_once_in_key_order(source, table, size):
    key = table_key(source, DB, table)
    everything = keys_in(source, key, KeyRange(None, None))
    chunks = [keys_in(source, key, keys) for keys in ChunkPlanner(source, key, size).ranges()]
    assert [k for chunk in chunks for k in chunk] == everything
    assert all(0 < len(chunk) <= size for chunk in chunks)
    assert len(chunks) == -(-len(everything) // size), "every chunk but the last is full"


def test_the_key_is_the_primary_keys_in_index_order_or_the_channels(source):
    assert table_key(source, DB, "pairs").names == ("b", "a")
    assert table_key(source, DB, "uniq", ["a", "b"]).names == ("a", "b")
    key = table_key(source, DB, "uniq", ["a", "b"])
    chunks = list(ChunkPlanner(source, key, 4).ranges())
    assert sum(len(keys_in(source, key, keys)) for keys in chunks) == 30


def test_rows_written_after_the_last_key_was_taken_are_left_to_the_stream(source, mariadb):
    key = table_key(source, DB, "ints")
    planner = ChunkPlanner(source, key, 100)
    ranges = planner.ranges()
    first = next(ranges)
    mariadb.execute("INSERT INTO ints VALUES (5000, 1)", database=DB)
    try:
        rest = list(ranges)
        assert rest[-1].through == (1999,), "the last key when the snapshot of the table started"
        assert (5000,) not in [k for keys in [first, *rest] for k in keys_in(source, key, keys)]
    finally:
        mariadb.execute("DELETE FROM ints WHERE id = 5000", database=DB)


def test_a_snapshot_resumes_after_the_last_key_it_did(source):
    key = table_key(source, DB, "ints")
    planner = ChunkPlanner(source, key, 50)
    done = list(planner.ranges())
    resumed = list(planner.ranges(done=done[3].through, last=done[-1].through))
    assert resumed == done[4:]


def test_a_back_fill_plans_full_chunks_of_the_rows_its_filter_takes_up_to_the_last_of_them(source):
    key = table_key(source, DB, "ints")
    where = checked_filter("v % 2 = 0 AND id < 1000")
    check_filter(source, DB, "ints", where)
    chunks = [[k for k in keys_in(source, key, keys) if k[0] % 2 == 0 and k[0] < 1000]
              for keys in ChunkPlanner(source, key, 25, where).ranges()]
    taken = source.query(f"SELECT id FROM {DB}.ints WHERE {where} ORDER BY id")
    assert [k for chunk in chunks for k in chunk] == taken
    assert all(len(chunk) == 25 for chunk in chunks[:-1]) and 0 < len(chunks[-1]) <= 25
    with pytest.raises(SourceDbError, match=f"table {DB}.ints: .*nosuch"):
        check_filter(source, DB, "ints", "nosuch = 1")


def test_an_empty_table_has_no_chunks(source):
    assert list(ChunkPlanner(source, table_key(source, DB, "empty"), 10).ranges()) == []


def test_a_table_without_a_key_or_with_a_nullable_one_is_refused_with_what_to_configure(source):
    with pytest.raises(TableKeyError, match=r"snapsource\.nokey.*no primary key.*`key`"):
        table_key(source, DB, "nokey")
    with pytest.raises(TableKeyError, match=r"no unique index holds exactly the channel's key \['a', 'b'\]"):
        table_key(source, DB, "nokey", ["a", "b"])
    with pytest.raises(TableKeyError, match=r"does not have: \['c'\]"):
        table_key(source, DB, "nokey", ["c"])


def test_a_key_that_may_be_null_or_orders_otherwise_than_its_text_is_refused(source, mariadb):
    mariadb.execute("ALTER TABLE nullable ADD UNIQUE KEY (a, b)", database=DB)
    with pytest.raises(TableKeyError, match=r"key column 'a' may be NULL"):
        table_key(source, DB, "nullable", ["a", "b"])
    with pytest.raises(TableKeyError, match=r"key column 'f' is a float"):
        table_key(source, DB, "floats")
    with pytest.raises(TableKeyError, match=r"key column 'e' is a enum"):
        table_key(source, DB, "enums")


def test_a_table_the_user_may_not_read_is_named(source):
    with pytest.raises(SourceDbAccessError, match=rf"table {DB}\.hidden: no such table, or user 'snapreader'"):
        table_key(source, DB, "hidden")
    with pytest.raises(SourceDbAccessError, match=rf"table {DB}\.hidden: .*SELECT command denied"):
        source.query(f"SELECT * FROM {DB}.hidden", table=f"{DB}.hidden")


def test_a_wrong_password_names_the_user_and_never_the_password(mariadb):
    wrong = f"wrong-{secrets.token_hex(8)}"
    with SourceDb(mariadb.host, mariadb.port, READER, wrong) as db, pytest.raises(SourceDbAuthError) as raised:
        db.query("SELECT 1")
    assert "'snapreader' was refused" in str(raised.value)
    assert wrong not in str(raised.value) and wrong not in repr(db)


def test_a_server_that_is_not_there_is_a_connection_error():
    with SourceDb(LOOPBACK, free_port(), READER, READER_PASSWORD, connect_timeout_s=2) as db:
        with pytest.raises(SourceDbConnectionError, match="connection failed"):
            db.query("SELECT 1")


def test_the_servers_estimate_of_a_tables_rows_is_near_its_count_and_none_for_a_table_not_there(source, mariadb):
    mariadb.execute("ANALYZE TABLE ints", database=DB)  # (InnoDB refreshes its statistics in the background)
    count = source.query(f"SELECT COUNT(*) FROM {DB}.ints")[0][0]
    estimate = table_rows_estimate(source, DB, "ints")
    assert estimate is not None and abs(estimate - count) <= count // 2, (estimate, count)
    assert table_rows_estimate(source, DB, "no_such_table") is None
