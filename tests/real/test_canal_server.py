"""Real Canal across restarts of itself and of MySQL, and a wrong password refused."""

from __future__ import annotations

import pytest

from canalbridge.canal import CanalAuthError, CanalConnector
from canalbridge.protocol import EntryProtocol_pb2 as pb
from tests.real.entries import describe, fetch_until, row_change

pytestmark = pytest.mark.real

DB = "resume"


def ends_a_transaction_with_an_insert(entries) -> bool:
    # Not just any TRANSACTIONEND: a restarted Canal first sends its cursor entry again, which
    # may be the previous transaction's end, alone in a batch if the parser has not caught up.
    inserts = [i for i, entry in enumerate(entries) if entry.header.eventType == pb.INSERT]
    return bool(inserts) and any(entry.entryType == pb.TRANSACTIONEND for entry in entries[inserts[0]:])


def inserted_ids(entries) -> list[str]:
    return [
        column.value
        for entry in entries
        if entry.entryType == pb.ROWDATA and entry.header.eventType == pb.INSERT
        for row in row_change(entry).rowDatas
        for column in row.afterColumns
        if column.isKey
    ]


def test_a_restarted_canal_resumes_from_its_meta_cursor(real_destination, canal, mariadb):
    real_destination(DB, setup=["CREATE TABLE r (id INT PRIMARY KEY, v VARCHAR(10))"])
    with canal.connector(DB) as connector:
        connector.subscribe()
        mariadb.execute("INSERT INTO r VALUES (1, 'one')", database=DB)
        first = fetch_until(connector, ends_a_transaction_with_an_insert)  # acked
    assert inserted_ids(first) == ["1"]

    assert canal.stop() == "term"  # SIGTERM: Canal's shutdown hook flushes meta.dat
    assert canal.meta_file(DB).is_file()
    mariadb.execute("INSERT INTO r VALUES (2, 'two')", database=DB)  # written while Canal is down
    canal.start()

    with canal.connector(DB) as connector:
        connector.subscribe()
        second = fetch_until(connector, ends_a_transaction_with_an_insert)
    assert inserted_ids(second) == ["2"], [describe(e) for e in second]


def offsets(entries) -> list[int]:
    return [entry.header.logfileOffset for entry in entries]


def insert_offsets(entries) -> list[int]:
    return [entry.header.logfileOffset for entry in entries if entry.header.eventType == pb.INSERT]


def test_a_restarted_canal_delivers_again_from_its_cursor_entry(real_destination, canal, mariadb):
    # What the dev server's restart models: Canal's meta cursor is the start of the last
    # transaction boundary acked, and a restarted Canal dumps the binlog from there.
    real_destination("redeliver", setup=["CREATE TABLE r (id INT PRIMARY KEY)"],
                     properties={"canal.instance.memory.batch.mode": "ITEMSIZE"})  # a get of 1 is one entry
    mariadb.execute("INSERT INTO r VALUES (1)", database="redeliver")
    with mariadb.connection("redeliver", autocommit=False) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO r VALUES (2)")
        cursor.execute("INSERT INTO r VALUES (3)")
        conn.commit()
    with canal.connector("redeliver") as connector:
        connector.subscribe()
        both = fetch_until(connector, lambda got: sum(e.entryType == pb.TRANSACTIONEND for e in got) == 2,
                           ack=False)
        first_end = next(i for i, e in enumerate(both) if e.entryType == pb.TRANSACTIONEND)
        connector.rollback()
        for _ in range(first_end + 3):  # the first transaction, and the first statement of the second
            connector.ack(connector.get_without_ack(1, 500).batch_id)
        connector.get_without_ack(1, 500)  # a reply after the acks: Canal has taken them

    assert canal.stop() == "term"  # a clean stop: meta.dat holds the cursor
    canal.start()
    with canal.connector("redeliver") as connector:
        connector.subscribe()
        again = fetch_until(connector, lambda got: any(e.entryType == pb.TRANSACTIONEND for e in got[1:]))
    assert offsets(again) == offsets(both[first_end:]), [describe(e) for e in again]


def test_a_lost_mysql_connection_makes_canal_send_the_open_transaction_again(real_destination, canal, mariadb):
    # Canal's parser records a position only at a transaction's end. When its MySQL connection
    # breaks (MySQL restarted, a network fault, a KILL) while it parses a transaction, it dumps
    # again from that end and puts the transaction's first part into the store a second time:
    # into the same stream, to a client that holds it un-acked, with no rollback between.
    # The dev server's Destination.lose_mysql_connection models this.
    db = "mysqlgone"
    real_destination(db, setup=["CREATE TABLE t (id INT PRIMARY KEY, pad VARCHAR(3000))"],
                     properties={"canal.instance.memory.buffer.size": "1024",  # 1 MiB: the parser blocks early
                                 "canal.instance.transaction.size": "16"})
    mariadb.execute("INSERT INTO t VALUES (0, 'small')", database=db)
    small_xid = mariadb.last_event_start("Xid")
    # One statement of about 24 MB of rows events: far more than the store and the sockets
    # hold, so the parser is still inside it when its connection is killed.
    mariadb.execute("INSERT INTO t SELECT seq, REPEAT('x', 3000) FROM seq_1_to_8000", database=db)
    events = mariadb.execute(f"SHOW BINLOG EVENTS IN '{small_xid[0]}' FROM {small_xid[1]}")
    big_rows = [int(event[1]) for event in events if str(event[2]).startswith("Write_rows")]
    with canal.connector(db) as connector:
        connector.subscribe()
        before: list[pb.Entry] = []
        batch_ids = []
        while len(inserted_ids(before)) < 2:  # the small transaction and the big one begun
            batch = connector.get_without_ack(1000, 500)
            before.extend(batch.entries)
            if not batch.is_empty:
                batch_ids.append(batch.batch_id)
        mariadb.kill_binlog_dump(canal.slave_id(db))  # to Canal, MySQL went away
        for batch_id in batch_ids:
            connector.ack(batch_id)
        # Canal may drop the big transaction's end: its parser flushes entries in chunks, and
        # a chunk holding only an end within 5 s of the last such chunk it passed is dropped as
        # an "empty transaction". So read through the next transaction's row instead.
        after = fetch_until(connector, lambda got: big_rows[-1] in offsets(got), 120)
        mariadb.execute("INSERT INTO t VALUES (-1, 'next')", database=db)
        after += fetch_until(connector, lambda got: inserted_ids(got) == ["-1"], 60)

    delivered = before + after
    places = offsets(delivered)
    back = [i for i in range(1, len(places)) if places[i] <= places[i - 1]]
    assert len(back) == 1, back  # the stream went back once, with no rollback asked for
    again = back[0]
    assert places[again] >= small_xid[1]  # no further than the last transaction end it had put
    first_time = [offset for offset in insert_offsets(delivered[:again]) if offset > small_xid[1]]
    # The first pass is in order, but may miss a chunk: the one the parser was putting
    # into the full store when the connection broke (Canal interrupts that put).
    assert first_time and first_time == sorted(set(first_time)) and set(first_time) <= set(big_rows)
    second_time = insert_offsets(delivered[again:])
    assert second_time[:-1] == big_rows  # the whole transaction again, in order, then the next one


def test_a_wrong_password_is_refused(canal):
    connector = CanalConnector(canal.host, canal.port, "warmup", username=canal.user, password="not-the-password")
    with pytest.raises(CanalAuthError):
        connector.connect()
    assert not connector.connected
