"""The dev kit's real Canal: it resumes from its own cursor after a restart and refuses a wrong password."""

from __future__ import annotations

import pytest

from canalbridge.canal import CanalAuthError, CanalConnector
from canalbridge.protocol import EntryProtocol_pb2 as pb
from tests.real.entries import describe, fetch_until, row_change

pytestmark = pytest.mark.real

DB = "resume"


def ends_a_transaction(entries) -> bool:
    return any(entry.entryType == pb.TRANSACTIONEND for entry in entries)


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
        first = fetch_until(connector, ends_a_transaction)  # acked
    assert inserted_ids(first) == ["1"]

    assert canal.stop() == "term"  # SIGTERM: Canal's shutdown hook flushes meta.dat
    assert canal.meta_file(DB).is_file()
    mariadb.execute("INSERT INTO r VALUES (2, 'two')", database=DB)  # written while Canal is down
    canal.start()

    with canal.connector(DB) as connector:
        connector.subscribe()
        second = fetch_until(connector, ends_a_transaction)
    assert inserted_ids(second) == ["2"], [describe(e) for e in second]


def test_a_wrong_password_is_refused(canal):
    connector = CanalConnector(canal.host, canal.port, "warmup", username=canal.user, password="not-the-password")
    with pytest.raises(CanalAuthError):
        connector.connect()
    assert not connector.connected
