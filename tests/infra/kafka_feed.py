"""Publish entries into Kafka as Canal 1.1.7 does in Kafka mode: for tests and benchmarks without a Canal.

Follows what ``tests/integration/real/test_canal_kafka_mode.py`` pins of the real Canal:

- protobuf: one record per Canal batch (:func:`protobuf_records`), a
  ``Packet`` (MESSAGES) around a ``Messages``; with partitions hashed
  (:func:`hashed_protobuf_records`), a record per batch and partition,
  split as Canal splits: transaction begin/end dropped, statements and DDL
  to partition 0, each rows entry split into one entry
  per row (same header), a row hashed by its after image's key (a DELETE's
  before image);
- flat: one JSON ``FlatMessage`` per ROWDATA entry (:func:`flat_records`),
  no transaction markers, no binlog position.

The hash need not be Canal's (Java's ``String.hashCode``): only that one key
always goes to one partition.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence

from canalbridge.protocol import CanalProtocol_pb2 as canal_pb
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

EntryType = entry_pb.EntryType
_ROWS = (entry_pb.EventType.INSERT, entry_pb.EventType.UPDATE, entry_pb.EventType.DELETE)


def protobuf_records(entries: Sequence[entry_pb.Entry], batch_entries: int = 50,
                     first_batch_id: int = 1) -> list[bytes]:
    """The record values Canal writes for ``entries``, ``batch_entries`` to a batch."""
    records = []
    for start in range(0, len(entries), batch_entries):
        body = canal_pb.Messages(batch_id=first_batch_id + start // batch_entries,
                                 messages=[entry.SerializeToString() for entry in entries[start:start + batch_entries]])
        records.append(canal_pb.Packet(type=canal_pb.PacketType.MESSAGES, version=1,
                                       body=body.SerializeToString()).SerializeToString())
    return records


def hashed_protobuf_records(entries: Sequence[entry_pb.Entry], partitions: int,
                            batch_entries: int = 50) -> dict[int, list[bytes]]:
    """Each partition's record values as Canal writes them with a primary-key ``partitionHash``.

    Canal splits each batch: one record per partition that gets entries of
    it, so the rows split from one entry are always in one record.
    """
    out: dict[int, list[bytes]] = {partition: [] for partition in range(partitions)}
    for start in range(0, len(entries), batch_entries):
        batch_id = 1 + start // batch_entries
        for partition, part in hash_by_key(entries[start:start + batch_entries], partitions).items():
            if part:
                out[partition] += protobuf_records(part, len(part), first_batch_id=batch_id)
    return out


def hash_by_key(entries: Iterable[entry_pb.Entry], partitions: int) -> dict[int, list[entry_pb.Entry]]:
    """Split entries over ``partitions`` as Canal splits one batch with a primary-key ``partitionHash``."""
    out: dict[int, list[entry_pb.Entry]] = {partition: [] for partition in range(partitions)}
    for entry in entries:
        if entry.entryType != EntryType.ROWDATA:
            continue  # Canal drops transaction begin/end when it hashes
        change = entry_pb.RowChange.FromString(entry.storeValue)
        if change.isDdl or change.eventType not in _ROWS:
            out[0].append(entry)
            continue
        for row in change.rowDatas:
            columns = row.beforeColumns if change.eventType == entry_pb.EventType.DELETE else row.afterColumns
            key = "|".join(column.value for column in columns if column.isKey)
            single = entry_pb.RowChange(eventType=change.eventType, sql=change.sql, rowDatas=[row])
            part = entry_pb.Entry(header=entry.header, entryType=EntryType.ROWDATA,
                                  storeValue=single.SerializeToString())
            out[zlib.crc32(f"{entry.header.tableName}:{key}".encode()) % partitions].append(part)
    return out


def flat_records(entries: Iterable[entry_pb.Entry], batch_id: int = 1) -> list[bytes]:
    """One flat JSON message per ROWDATA entry, as Canal writes them (nulls written)."""
    return [json.dumps(flat_message(entry, batch_id), ensure_ascii=False).encode("utf-8")
            for entry in entries if entry.entryType == EntryType.ROWDATA]


def flat_message(entry: entry_pb.Entry, batch_id: int = 1) -> dict[str, object]:
    """The ``FlatMessage`` Canal builds from one ROWDATA entry."""
    header = entry.header
    change = entry_pb.RowChange.FromString(entry.storeValue)
    rows = change.eventType in _ROWS and not change.isDdl
    message: dict[str, object] = {
        "data": None, "database": header.schemaName, "es": header.executeTime, "gtid": header.gtid,
        "id": batch_id, "isDdl": change.isDdl, "mysqlType": None, "old": None, "pkNames": None,
        "sql": change.sql, "sqlType": None, "table": header.tableName, "ts": int(time.time() * 1000),
        "type": entry_pb.EventType.Name(header.eventType),
    }
    if not rows:
        return message
    data, old = [], []
    for row in change.rowDatas:
        image = row.beforeColumns if change.eventType == entry_pb.EventType.DELETE else row.afterColumns
        data.append(_values(image))
        if change.eventType == entry_pb.EventType.UPDATE:
            after = {column.name: column for column in row.afterColumns}
            old.append({c.name: None if c.isNull else c.value for c in row.beforeColumns
                        if c.name in after and after[c.name].updated})
    columns = list(row.afterColumns or row.beforeColumns) if change.rowDatas else []
    message.update({
        "data": data, "old": old if change.eventType == entry_pb.EventType.UPDATE else None,
        "pkNames": [c.name for c in columns if c.isKey],
        "mysqlType": {c.name: c.mysqlType for c in columns}, "sqlType": {c.name: c.sqlType for c in columns},
    })
    return message


def _values(columns: Iterable[entry_pb.Column]) -> dict[str, str | None]:
    return {column.name: None if column.isNull else column.value for column in columns}


def publish(bootstrap: str, topic: str, records: Mapping[int, Sequence[bytes]], **security: str) -> dict[int, int]:
    """Write each partition's record values in order (null keys, as Canal); the end offset of each partition.

    ``security``: kafka-python's settings to log in (KafkaBroker.client_security).
    """
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_in_flight_requests_per_connection=1,
                             linger_ms=5, max_request_size=16 * 1024 * 1024, **security)
    try:
        ends = {}
        for partition, values in records.items():
            futures = [producer.send(topic, value=value, partition=partition) for value in values]
            producer.flush()
            ends[partition] = futures[-1].get(timeout=60).offset + 1 if futures else 0
        return ends
    finally:
        producer.close()
