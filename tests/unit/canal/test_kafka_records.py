"""Canal's Kafka records (protobuf Packets and flat JSON) read back as entries; what is not one is named."""

from __future__ import annotations

import json

import pytest

from canalbridge.canal.kafka_records import RecordDecodeError, RecordFormat, decode_record
from canalbridge.protocol import CanalProtocol_pb2 as canal_pb
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.schema.rows import rows_count

# The shape Canal 1.1.7 writes (fastjson2, nulls written), as captured from a real Canal.
FLAT_UPDATE = {
    "data": [{"id": "30", "v": "z", "d": "1.50", "ts": None}, {"id": "2", "v": "y", "d": "2.0", "ts": None}],
    "database": "shop", "es": 1795579380000, "gtid": "", "id": 7, "isDdl": False,
    "mysqlType": {"id": "int(11)", "v": "varchar(20)", "d": "decimal(6,2)", "ts": "datetime"},
    "old": [{"id": "3", "v": "a"}, {"v": "b"}], "pkNames": ["id"], "sql": "",
    "sqlType": {"id": 4, "v": 12, "d": 3, "ts": 93}, "table": "t", "ts": 1795579380855, "type": "UPDATE",
}


def _flat(message: object) -> bytes:
    return json.dumps(message).encode()


def _columns(columns) -> dict[str, tuple[str, bool]]:
    return {column.name: (column.value, column.isNull) for column in columns}


def test_a_flat_update_becomes_the_rows_entry_it_came_from():
    batch = decode_record(_flat(FLAT_UPDATE), RecordFormat.FLAT)
    (entry,) = batch.entries
    header = entry.header
    assert (header.schemaName, header.tableName, header.eventType) == ("shop", "t", entry_pb.EventType.UPDATE)
    assert (header.executeTime, header.logfileName, header.logfileOffset) == (1795579380000, "", 0)
    assert rows_count(header) == 2 and batch.raw_size == len(_flat(FLAT_UPDATE))
    first, second = entry_pb.RowChange.FromString(entry.storeValue).rowDatas
    # The before image is the after image with the old values of the changed columns: a key change shows.
    assert _columns(first.beforeColumns) == {"id": ("3", False), "v": ("a", False), "d": ("1.50", False),
                                             "ts": ("", True)}
    assert _columns(first.afterColumns)["id"] == ("30", False)
    assert {c.name for c in first.afterColumns if c.updated} == {"id", "v"}
    assert _columns(second.beforeColumns)["v"] == ("b", False)
    column = first.afterColumns[2]
    assert (column.index, column.mysqlType, column.sqlType, column.isKey) == (2, "decimal(6,2)", 3, False)
    assert first.afterColumns[0].isKey


def test_a_flat_delete_carries_the_before_image_and_an_insert_the_after_image():
    delete = decode_record(_flat({**FLAT_UPDATE, "type": "DELETE", "old": None}), RecordFormat.FLAT).entries[0]
    row = entry_pb.RowChange.FromString(delete.storeValue).rowDatas[0]
    assert not row.afterColumns and _columns(row.beforeColumns)["id"] == ("30", False)
    insert = decode_record(_flat({**FLAT_UPDATE, "type": "INSERT", "old": None}), RecordFormat.FLAT).entries[0]
    row = entry_pb.RowChange.FromString(insert.storeValue).rowDatas[0]
    assert not row.beforeColumns and all(column.updated for column in row.afterColumns)


def test_a_flat_ddl_is_a_ddl_entry_with_its_statement():
    ddl = {"data": None, "database": "shop", "es": 1, "gtid": "", "id": 1, "isDdl": True, "mysqlType": None,
           "old": None, "pkNames": None, "sql": "ALTER TABLE t ADD COLUMN w INT", "sqlType": None, "table": "t",
           "ts": 2, "type": "ALTER"}
    (entry,) = decode_record(_flat(ddl), RecordFormat.FLAT).entries
    change = entry_pb.RowChange.FromString(entry.storeValue)
    assert (change.isDdl, change.sql, change.ddlSchemaName) == (True, ddl["sql"], "shop")
    assert entry.header.eventType == entry_pb.EventType.ALTER and not change.rowDatas


def test_a_protobuf_record_is_a_packet_of_messages():
    entries = [entry_pb.Entry(header=entry_pb.Header(logfileName="mysql-bin.000001", logfileOffset=offset),
                              entryType=entry_pb.EntryType.TRANSACTIONEND) for offset in (4, 90)]
    body = canal_pb.Messages(batch_id=3, messages=[entry.SerializeToString() for entry in entries])
    packet = canal_pb.Packet(type=canal_pb.PacketType.MESSAGES, body=body.SerializeToString())
    batch = decode_record(packet.SerializeToString(), RecordFormat.PROTOBUF)
    assert batch.batch_id == 3 and [e.header.logfileOffset for e in batch.entries] == [4, 90]


@pytest.mark.parametrize(("value", "record_format", "says"), [
    (b"", RecordFormat.FLAT, "no value"),
    (None, RecordFormat.PROTOBUF, "no value"),
    (b"{not json", RecordFormat.FLAT, "not JSON"),
    (b"\xff\xfe", RecordFormat.FLAT, "not JSON"),
    (b'{"hello": 1}', RecordFormat.FLAT, "not a Canal flat message"),
    (_flat({**FLAT_UPDATE, "type": "UPSERT"}), RecordFormat.FLAT, "unknown type 'UPSERT'"),
    (_flat({**FLAT_UPDATE, "type": "INSERT", "data": [{"id": 1}]}), RecordFormat.FLAT, "column 'id' is int"),
    (_flat({**FLAT_UPDATE, "data": "rows"}), RecordFormat.FLAT, "'data' is not a list of rows"),
    (_flat({**FLAT_UPDATE, "old": [{}]}), RecordFormat.FLAT, "2 rows and 1 old images"),
    (_flat({**FLAT_UPDATE, "sqlType": {"id": "4"}}), RecordFormat.FLAT, "sqlType '4'"),
    (_flat(FLAT_UPDATE), RecordFormat.PROTOBUF, "not a Canal protobuf Packet"),
    (canal_pb.Packet(type=canal_pb.PacketType.HEARTBEATS).SerializeToString(), RecordFormat.PROTOBUF,
     "type HEARTBEATS"),
    (canal_pb.Packet(type=canal_pb.PacketType.MESSAGES, compression=canal_pb.Compression.GZIP,
                     body=b"x").SerializeToString(), RecordFormat.PROTOBUF, "compressed with GZIP"),
    (canal_pb.Packet(type=canal_pb.PacketType.MESSAGES, body=b"\x12\x03abc").SerializeToString(),
     RecordFormat.PROTOBUF, "does not parse"),
    (canal_pb.Packet(type=canal_pb.PacketType.MESSAGES,
                     body=canal_pb.Messages(batch_id=1).SerializeToString()).SerializeToString(),
     RecordFormat.PROTOBUF, "no entries"),
])
def test_a_record_that_is_not_a_canal_message_is_named(value, record_format, says):
    with pytest.raises(RecordDecodeError, match=says.replace("(", r"\(")):
        decode_record(value, record_format)
