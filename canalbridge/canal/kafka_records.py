"""What Canal writes into Kafka (``canal.serverMode = kafka``), read back as the entries of a batch.

Canal writes one of two record formats, chosen by ``canal.mq.flatMessage``:

- protobuf (false): the record value is a ``Packet`` of type MESSAGES whose
  body is a ``Messages`` (a batch id and serialized ``Entry``\\ s), the same
  body a TCP ``getWithoutAck`` returns. One record holds a whole Canal batch,
  or, with ``canal.mq.partitionHash``, the part of it hashed to one partition
  (Canal then drops the transaction begin/end entries, and splits a rows
  entry into one entry per row).
- flat JSON (true, Canal's default): one ``FlatMessage`` object per entry:
  ``database``, ``table``, ``type`` (the event type's name), ``isDdl``,
  ``sql``, ``data`` (the rows, column name -> text or null), ``old`` (of an
  UPDATE, the before values of the columns it changed), ``mysqlType``,
  ``sqlType``, ``pkNames``, ``es`` (execute time, ms), ``ts``, ``gtid``,
  ``id`` (Canal's batch id). There are no transaction begin/end entries and
  no binlog positions.

Both become :class:`~canalbridge.canal.CanalBatch`\\ es of ``Entry``\\ s, so
everything downstream reads one vocabulary; a flat message becomes the
ROWDATA entry Canal built it from (header, and a ``RowChange`` with the same
column texts, types, keys and null flags). What a flat message does not
carry stays empty: the binlog file and offset, column lengths.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from google.protobuf.message import DecodeError

from canalbridge.canal.batch import CanalBatch, parse_messages
from canalbridge.protocol import CanalProtocol_pb2 as canal_pb
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

_UNCOMPRESSED = frozenset({canal_pb.Compression.COMPRESSIONCOMPATIBLEPROTO2, canal_pb.Compression.NONE})
_ROWS_EVENTS = frozenset({"INSERT", "UPDATE", "DELETE"})


class RecordFormat(Enum):
    """``canal.mq.flatMessage``: false is PROTOBUF, true is FLAT."""

    PROTOBUF = "protobuf"
    FLAT = "flat"


class RecordDecodeError(ValueError):
    """A Kafka record that is not a Canal message of the expected format; says what is wrong with it."""


def decode_record(value: bytes | None, record_format: RecordFormat) -> CanalBatch:
    """The entries of one record Canal wrote; :class:`RecordDecodeError` if it is not one."""
    if not value:
        raise RecordDecodeError("the record has no value")
    if record_format is RecordFormat.PROTOBUF:
        return _decode_packet(value)
    return _decode_flat(value)


def _decode_packet(value: bytes) -> CanalBatch:
    try:
        packet = canal_pb.Packet.FromString(value)
    except DecodeError as exc:
        raise RecordDecodeError(f"not a Canal protobuf Packet ({exc})") from exc
    if packet.type != canal_pb.PacketType.MESSAGES:
        raise RecordDecodeError(f"a Canal Packet of type {canal_pb.PacketType.Name(packet.type)}, not MESSAGES")
    if packet.compression not in _UNCOMPRESSED:
        raise RecordDecodeError(f"a Packet compressed with {canal_pb.Compression.Name(packet.compression)}, "
                                "which Canal never writes")
    try:
        batch = parse_messages(packet.body)
    except DecodeError as exc:
        raise RecordDecodeError(f"a Packet whose Messages body does not parse ({exc})") from exc
    if not batch.entries:
        raise RecordDecodeError("a Packet with no entries")
    return batch


def _decode_flat(value: bytes) -> CanalBatch:
    try:
        parsed = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordDecodeError(f"not JSON ({exc})") from exc
    messages = parsed if isinstance(parsed, list) else [parsed]
    entries = []
    batch_id = 0
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise RecordDecodeError("JSON that is not a Canal flat message (an object with a 'type')")
        batch_id = _int(message, "id")
        entries.append(flat_message_entry(message))
    return CanalBatch(batch_id, tuple(entries), len(value))


def flat_message_entry(message: Mapping[str, Any]) -> entry_pb.Entry:
    """The ROWDATA entry a flat message was built from (no binlog position: a flat message has none)."""
    name = message["type"]
    if name not in entry_pb.EventType.keys():
        raise RecordDecodeError(f"a flat message of unknown type {name!r}")
    schema, table = _text(message, "database"), _text(message, "table")
    header = entry_pb.Header(executeTime=_int(message, "es"), schemaName=schema, tableName=table,
                             eventType=name, gtid=_text(message, "gtid"),
                             sourceType=entry_pb.Type.MYSQL)
    change = entry_pb.RowChange(eventType=name, isDdl=bool(message.get("isDdl")), sql=_text(message, "sql"))
    if change.isDdl:
        change.ddlSchemaName = schema
    if name in _ROWS_EVENTS:
        rows = _rows(message, "data")
        old = _rows(message, "old") if name == "UPDATE" and message.get("old") is not None else []
        if old and len(old) != len(rows):
            raise RecordDecodeError(f"a flat {name} of {schema}.{table} with {len(rows)} rows and {len(old)} "
                                    "old images")
        mysql_types = _mapping(message, "mysqlType")
        sql_types = _mapping(message, "sqlType")
        keys = frozenset(message.get("pkNames") or ())
        for index, row in enumerate(rows):
            row_data = change.rowDatas.add()
            if name == "DELETE":
                _fill(row_data.beforeColumns, row, mysql_types, sql_types, keys, updated=frozenset())
            elif name == "INSERT":
                _fill(row_data.afterColumns, row, mysql_types, sql_types, keys, updated=frozenset(row))
            else:
                changed = old[index] if old else {}
                _fill(row_data.beforeColumns, {**row, **changed}, mysql_types, sql_types, keys,
                      updated=frozenset())
                _fill(row_data.afterColumns, row, mysql_types, sql_types, keys, updated=frozenset(changed))
        header.props.add(key="rowsCount", value=str(len(rows)))
    return entry_pb.Entry(header=header, entryType=entry_pb.EntryType.ROWDATA,
                          storeValue=change.SerializeToString())


def _fill(columns: Any, row: Mapping[str, Any], mysql_types: Mapping[str, Any], sql_types: Mapping[str, Any],
          keys: frozenset[str], *, updated: frozenset[str]) -> None:
    for index, (name, value) in enumerate(row.items()):
        if value is not None and not isinstance(value, str):
            raise RecordDecodeError(f"a flat message whose column {name!r} is {type(value).__name__}, not text")
        columns.add(index=index, name=name, value=value or "", isNull=value is None,
                    mysqlType=str(mysql_types.get(name) or ""), sqlType=_sql_type(sql_types.get(name)),
                    isKey=name in keys, updated=name in updated)


def _sql_type(value: Any) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordDecodeError(f"a flat message with sqlType {value!r}, not a number")
    return value


def _rows(message: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    rows = message.get(key)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise RecordDecodeError(f"a flat {message['type']} whose {key!r} is not a list of rows")
    return rows


def _mapping(message: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = message.get(key) or {}
    if not isinstance(value, dict):
        raise RecordDecodeError(f"a flat message whose {key!r} is not an object")
    return value


def _text(message: Mapping[str, Any], key: str) -> str:
    value = message.get(key)
    return value if isinstance(value, str) else ""


def _int(message: Mapping[str, Any], key: str) -> int:
    value = message.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
