"""Smoke test of the real stack: our connector reads what a real Canal makes of a MariaDB transaction.

The asserted sequence is what Canal (server modules 1.1.7, whose entry path
is the same as 1.1.8's) sends for MariaDB 10.11 with gtid mode off and
``canal.instance.filter.query.dml = false``:

- no TRANSACTIONBEGIN: MariaDB writes no BEGIN query event; and no GTIDLOG
  either: Canal converts MariaDB's GTID event to a GTIDLOG entry, but its
  EventTransactionBuffer drops every entry type other than TRANSACTIONBEGIN,
  TRANSACTIONEND, ROWDATA and HEARTBEAT before the store;
- each statement's Annotate_rows event as a ROWDATA entry of event type QUERY
  (empty schema and table, the statement in ``RowChange.sql``), then its rows;
- TRANSACTIONEND (from the Xid event; its header has no event type);
- a DDL as one ROWDATA entry with ``isDdl`` and the statement.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as pb
from tests.integration.real.entries import Shape, describe, fetch_until, is_ddl, row_change

pytestmark = pytest.mark.real

DB = "smoke"
TABLE = (
    "CREATE TABLE t (id INT PRIMARY KEY, amount DECIMAL(10,2), at DATETIME(3), doc JSON,"
    " name VARCHAR(20) CHARACTER SET utf8mb4, big BIGINT UNSIGNED)"
)
EMOJI_NAME = "h\U0001f600"


def test_a_mariadb_transaction_and_a_ddl_through_real_canal(real_destination, canal, mariadb):
    real_destination(DB, setup=[TABLE])
    with canal.connector(DB) as connector:
        connector.subscribe()  # empty: the destination's own filter (smoke\..*) applies
        with mariadb.connection(DB, autocommit=False) as conn, conn.cursor() as cursor:
            cursor.execute(
                "INSERT INTO t VALUES (1, 2.00, '2024-01-02 03:04:05.678', '{\"a\": 1}', %s, 18446744073709551615),"
                " (2, 1.50, NULL, NULL, NULL, 0)",
                (EMOJI_NAME,),
            )
            cursor.execute("UPDATE t SET amount = 3.25 WHERE id = 1")
            cursor.execute("DELETE FROM t WHERE id = 2")
            conn.commit()
        master_file, _ = mariadb.master_status()
        mariadb.execute("ALTER TABLE t ADD COLUMN extra INT", database=DB)

        entries = fetch_until(connector, lambda got: any(is_ddl(e) for e in got))

    shapes = [describe(entry) for entry in entries]
    assert shapes == [
        Shape("ROWDATA", "QUERY"),
        Shape("ROWDATA", "INSERT", DB, "t"),
        Shape("ROWDATA", "QUERY"),
        Shape("ROWDATA", "UPDATE", DB, "t"),
        Shape("ROWDATA", "QUERY"),
        Shape("ROWDATA", "DELETE", DB, "t"),
        Shape("TRANSACTIONEND", "EVENTTYPECOMPATIBLEPROTO2"),
        Shape("ROWDATA", "ALTER", DB, "t"),
    ]
    assert not [e for e in entries if e.entryType in (pb.TRANSACTIONBEGIN, pb.GTIDLOG)]

    # Headers: the binlog file and increasing offsets, MariaDB's server id, no gtid (gtid mode off).
    offsets = [entry.header.logfileOffset for entry in entries]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for entry in entries:
        assert entry.header.logfileName == master_file
        assert entry.header.serverId == 1
        assert entry.header.gtid == ""
        assert entry.header.executeTime > 0
        assert entry.header.sourceType == pb.MYSQL

    annotate = [row_change(entries[i]) for i in (0, 2, 4)]
    assert [rc.sql.split()[0] for rc in annotate] == ["INSERT", "UPDATE", "DELETE"]
    assert not any(rc.isDdl or rc.rowDatas for rc in annotate)

    end = pb.TransactionEnd.FromString(entries[6].storeValue)
    assert int(end.transactionId) > 0  # MariaDB's xid

    ddl = row_change(entries[7])
    assert ddl.isDdl and ddl.sql == "ALTER TABLE t ADD COLUMN extra INT" and ddl.ddlSchemaName == DB

    insert, update, delete = (row_change(entries[i]) for i in (1, 3, 5))
    assert [len(rc.rowDatas) for rc in (insert, update, delete)] == [2, 1, 1]
    assert [p.value for p in entries[1].header.props if p.key == "rowsCount"] == ["2"]

    first, second = (columns_of(row.afterColumns) for row in insert.rowDatas)
    # name: (value, mysqlType, sqlType, isKey, isNull)
    assert first == {
        "id": ("1", "int(11)", 4, True, False),
        "amount": ("2.0", "decimal(10,2)", 3, False, False),  # a zero fraction comes out as one zero
        "at": ("2024-01-02 03:04:05.678", "datetime(3)", 93, False, False),
        "doc": ('{"a": 1}', "longtext", 2005, False, False),  # MariaDB's JSON is longtext (CLOB)
        "name": (EMOJI_NAME, "varchar(20)", 12, False, False),
        "big": ("18446744073709551615", "bigint(20) unsigned", 3, False, False),  # widened: DECIMAL
    }
    assert second == {
        "id": ("2", "int(11)", 4, True, False),
        "amount": ("1.50", "decimal(10,2)", 3, False, False),
        "at": ("", "datetime(3)", 93, False, True),
        "doc": ("", "longtext", 2005, False, True),
        "name": ("", "varchar(20)", 12, False, True),
        "big": ("0", "bigint(20) unsigned", -5, False, False),  # fits a signed BIGINT: sqlType BIGINT
    }
    assert all(column.updated for row in insert.rowDatas for column in row.afterColumns)

    (changed,) = update.rowDatas
    assert columns_of(changed.beforeColumns)["amount"][0] == "2.0"
    assert columns_of(changed.afterColumns)["amount"][0] == "3.25"
    assert [c.name for c in changed.afterColumns if c.updated] == ["amount"]
    assert not any(c.updated for c in changed.beforeColumns)

    (deleted,) = delete.rowDatas
    assert not deleted.afterColumns
    assert columns_of(deleted.beforeColumns) == second

    # The values Canal sent are MariaDB's, as the database reads them now.
    assert mariadb.execute("SELECT id, amount FROM t", database=DB) == [(1, Decimal("3.25"))]


def columns_of(columns) -> dict[str, tuple[str, str, int, bool, bool]]:
    return {c.name: (c.value, c.mysqlType, c.sqlType, c.isKey, c.isNull) for c in columns}
