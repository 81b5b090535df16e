"""Signal rows as watermarks, through the real Canal server: in the stream in order with the changes around
them, the close signal delivered even when nothing is written after it, and a window noting exactly the keys
changed between its two signals."""

from __future__ import annotations

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as pb
from canalbridge.source_db import CLOSE, OPEN, Signal, SignalTable, SignalTableError, SourceDb
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.snapshot.chunk_window import ChunkWindow, WindowState, signals_in
from tests.integration.real.entries import describe, fetch_until, row_change

pytestmark = pytest.mark.real

DB = "watermarks"
SIGNALS = "canalbridge_signal"
USER, PASSWORD = "signaller", "signaller-secret"


def signals(entries) -> list[Signal]:
    return [signal for entry in entries if entry.entryType == pb.ROWDATA and entry.header.tableName == SIGNALS
            for signal in signals_in(row_change(entry))]


def test_a_window_notes_the_keys_changed_between_its_signals_and_the_close_arrives_on_a_quiet_source(
        real_destination, canal, mariadb):
    real_destination(DB, setup=["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))",
                                "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
                                SIGNAL_TABLE_DDL.format(table=SIGNALS)])
    mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS)  # (the grants the docs ask for)
    with canal.connector(DB) as connector, SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db:
        connector.subscribe()
        table = SignalTable(db, DB, SIGNALS)
        table.check()
        mariadb.execute("UPDATE t SET v = 'before' WHERE id = 1", database=DB)
        table.write(Signal("w1", OPEN, {"table": f"{DB}.t"}))
        mariadb.execute("UPDATE t SET id = 20 WHERE id = 2", "DELETE FROM t WHERE id = 3",
                        "INSERT INTO t VALUES (5, 'e')", database=DB)
        table.write(Signal("w1", CLOSE, {}))  # the last write: nothing comes after it
        entries = fetch_until(connector, lambda got: any(s.kind == CLOSE for s in signals(got)))
    assert [(s.window, s.kind, dict(s.data)) for s in signals(entries)] == [
        ("w1", OPEN, {"table": f"{DB}.t"}), ("w1", CLOSE, {})], [describe(e) for e in entries]

    window = ChunkWindow("w1", TableId(DB, "t"), ["id"])
    for entry in entries:
        if entry.entryType != pb.ROWDATA:
            continue
        change = row_change(entry)
        if entry.header.tableName == SIGNALS:
            for signal in signals_in(change):
                if signal.kind == OPEN:
                    window.opened()
                else:
                    assert window.closed("txn")
        elif entry.header.tableName == "t" and not change.isDdl:
            window.note(change)
    assert window.state is WindowState.CLOSED
    assert window.keys == {("2",), ("20",), ("3",), ("5",)}, "not key 1, changed before the open signal"
    with SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db:
        SignalTable(db, DB, SIGNALS).remove("w1")
    assert mariadb.execute(f"SELECT COUNT(*) FROM {SIGNALS}", database=DB) == [(0,)]


def test_a_signal_table_that_is_missing_says_how_to_create_it(mariadb):
    mariadb.create_database("nosignal")
    mariadb.execute(f"DROP USER IF EXISTS '{USER}'@'%'", f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'",
                    f"GRANT SELECT ON nosignal.* TO '{USER}'@'%'")
    with SourceDb(mariadb.host, mariadb.port, USER, PASSWORD) as db, pytest.raises(SignalTableError) as raised:
        SignalTable(db, "nosignal", SIGNALS).check()
    assert f"nosignal.{SIGNALS}: " in str(raised.value)
    assert f"CREATE TABLE `nosignal`.`{SIGNALS}`" in str(raised.value), "says how to create it"
