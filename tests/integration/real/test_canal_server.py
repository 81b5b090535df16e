"""Real Canal across its own restarts, and a wrong password refused."""

from __future__ import annotations

import pytest

from canalbridge.canal import CanalAuthError, CanalConnector
from canalbridge.protocol import EntryProtocol_pb2 as pb
from tests.integration.real.entries import describe, fetch_until, row_change

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
        # Canal answers no ack: the reply to a later request proves it took them. Without
        # this, the stop below could run before Canal read the last ack (CI saw "1" again).
        connector.get_without_ack(1)  # nothing is written after the insert: an empty batch
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


def test_a_wrong_password_is_refused(canal):
    connector = CanalConnector(canal.host, canal.port, "warmup", username=canal.user, password="not-the-password")
    with pytest.raises(CanalAuthError):
        connector.connect()
    assert not connector.connected
