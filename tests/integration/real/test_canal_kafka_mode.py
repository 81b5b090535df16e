"""Canal 1.1.7 in Kafka mode over the real MariaDB, into a real Kafka broker, read back with kafka_records.

One workload is published twice, by a Canal writing protobuf records and by
one writing flat JSON (``canal.mq.flatMessage``), both from the same binlog
position; a third Canal hashes the rows over 3 partitions by primary key.
The tests pin what the bridge relies on: both formats decode to the same
row changes, the protobuf stream keeps binlog positions and transaction ends,
the flat one has neither, and a hashed topic keeps each key in one
partition, in order, without transaction ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from canalbridge.canal.kafka_records import RecordFormat, decode_record
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from tests.infra.canal_server import CanalDestination, CanalServer, KafkaMode
from tests.infra.kafka_broker import KafkaBroker
from tests.infra.mariadb import MariaDBServer

DATABASE = "kmode"
SETUP = (
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40) CHARACTER SET utf8mb4, price DECIMAL(8,2), "
    "seen DATETIME(3) NULL, doc JSON NULL, raw VARBINARY(8) NULL)",
)
WORKLOAD = (
    ("BEGIN",
     "INSERT INTO items VALUES (1, 'plain', 1.50, '2024-01-02 03:04:05.678', '{\"a\": [1, 2]}', x'00ff10'), "
     "(2, 'ünïcödé ✓', 2.00, NULL, NULL, NULL), (3, 'three', NULL, NULL, NULL, NULL)",
     "UPDATE items SET name = 'renamed', price = price + 1 WHERE id IN (1, 2)",
     "COMMIT"),
    ("UPDATE items SET id = 30 WHERE id = 3",),  # a primary-key change
    ("DELETE FROM items WHERE id = 2",),
    ("INSERT INTO items (id, name) VALUES (4, NULL)",),
)
# By the key of the row image Canal hashes: the after image, but a DELETE's before image. So the
# update that moves key 3 to 30 is hashed by 30, not with key 3's insert (alibaba/canal#3152).
EXPECTED_KEYS_IN_ORDER = {"1": ["I", "U"], "2": ["I", "U", "D"], "3": ["I"], "30": ["U"], "4": ["I"]}


ROW_CHANGES = 8  # 3 inserts, 3 updates (one of a key), a delete, an insert
TRANSACTIONS = len(WORKLOAD)


def _published(broker: KafkaBroker, topic: str, partitions: int, record_format: RecordFormat,
               ends: int = 0) -> dict[int, list[bytes]]:
    """Every record of ``topic`` by partition, once the workload's row changes (and ``ends`` transaction
    ends) have all arrived, however Canal cut them into batches (or 60 s passed)."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning()
        got: dict[int, list[bytes]] = defaultdict(list)
        for _ in range(60):
            for partition, batch in consumer.poll(timeout_ms=1000).items():
                got[partition.partition].extend(record.value for record in batch)
            entries = [entry for values in got.values() for entry in _entries(values, record_format)]
            done = sum(1 for entry in entries if entry.entryType == entry_pb.EntryType.TRANSACTIONEND)
            if len(_row_changes(entries)) >= ROW_CHANGES and done >= ends:
                break
        return dict(got)
    finally:
        consumer.close()


def _entries(values: list[bytes], record_format: RecordFormat) -> list[entry_pb.Entry]:
    return [entry for value in values for entry in decode_record(value, record_format).entries]


def _row_changes(entries: list[entry_pb.Entry]) -> list[tuple]:
    """Each DML row as (table, event, before, after): columns as (name, value, null, mysqlType, sqlType, key)."""
    out = []
    for entry in entries:
        header = entry.header
        if entry.entryType != entry_pb.EntryType.ROWDATA or header.eventType not in (1, 2, 3):
            continue
        change = entry_pb.RowChange.FromString(entry.storeValue)
        for row in change.rowDatas:
            out.append((
                f"{header.schemaName}.{header.tableName}", entry_pb.EventType.Name(header.eventType),
                *[tuple((c.name, c.value, c.isNull, c.mysqlType, c.sqlType, c.isKey) for c in columns)
                  for columns in (row.beforeColumns, row.afterColumns)],
            ))
    return out


@pytest.fixture(scope="module")
def published(tmp_path_factory, mariadb: MariaDBServer,
              kafka_broker: KafkaBroker) -> Iterator[dict[str, dict[int, list[bytes]]]]:
    """The workload as each Canal published it: topic -> partition -> record values."""
    root: Path = tmp_path_factory.mktemp("kafka-mode")
    mariadb.create_database(DATABASE)
    mariadb.execute(*SETUP, database=DATABASE)
    broker = kafka_broker
    servers = []
    try:
        layouts = {"kproto": (False, 1, {}), "kflat": (True, 1, {}),
                   "khash": (False, 3, {"canal.mq.partitionsNum": "3",
                                        "canal.mq.partitionHash": rf"{DATABASE}\.items:id"})}
        for topic, (flat, partitions, extra) in layouts.items():
            broker.create_topic(topic, partitions)
            destination = CanalDestination(topic, filter_regex=rf"{DATABASE}\..*",
                                           properties={"canal.mq.topic": topic, **extra})
            servers.append(CanalServer(root / topic, mariadb, [destination], heap_max="256m",
                                       kafka=KafkaMode(broker.bootstrap, flat_message=flat)).start())
        for transaction in WORKLOAD:
            mariadb.execute(*transaction, database=DATABASE)
        yield {
            "kproto": _published(broker, "kproto", 1, RecordFormat.PROTOBUF, TRANSACTIONS),
            "kflat": _published(broker, "kflat", 1, RecordFormat.FLAT),
            "khash": _published(broker, "khash", 3, RecordFormat.PROTOBUF),
        }
    finally:
        for server in servers:
            server.stop()


def test_both_formats_carry_the_same_row_changes(published):
    proto = _row_changes(_entries(published["kproto"][0], RecordFormat.PROTOBUF))
    flat = _row_changes(_entries(published["kflat"][0], RecordFormat.FLAT))
    assert [change[:2] for change in proto] == [
        ("kmode.items", "INSERT")] * 3 + [("kmode.items", "UPDATE")] * 3 + [
        ("kmode.items", "DELETE"), ("kmode.items", "INSERT")]
    assert flat == proto
    inserted = proto[1][3]
    assert ("name", "ünïcödé ✓", False, "varchar(40)", 12, False) in inserted
    assert ("seen", "", True, "datetime(3)", 93, False) in inserted


def test_protobuf_records_keep_binlog_positions_and_transaction_ends(published):
    entries = _entries(published["kproto"][0], RecordFormat.PROTOBUF)
    ends = [entry for entry in entries if entry.entryType == entry_pb.EntryType.TRANSACTIONEND]
    assert len(ends) == TRANSACTIONS
    positions = [(entry.header.logfileName, entry.header.logfileOffset) for entry in entries]
    assert all(journal for journal, _ in positions) and positions == sorted(positions)


def test_flat_records_have_no_positions_and_no_transaction_markers(published):
    entries = _entries(published["kflat"][0], RecordFormat.FLAT)
    assert {entry.entryType for entry in entries} == {entry_pb.EntryType.ROWDATA}
    assert all(entry.header.logfileName == "" and entry.header.executeTime > 0 for entry in entries)


def test_a_key_hashed_topic_keeps_each_key_in_one_partition_in_order(published):
    """Per partition, in order; no transaction ends (Canal drops them when it hashes)."""
    by_key: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for partition, values in published["khash"].items():
        entries = _entries(values, RecordFormat.PROTOBUF)
        assert entry_pb.EntryType.TRANSACTIONEND not in {entry.entryType for entry in entries}
        for _table, event, before, after in _row_changes(entries):
            key = dict((c[0], c[1]) for c in (after or before))["id"]
            by_key[key].append((partition, event[0]))
    assert {key: [event for _, event in changes] for key, changes in by_key.items()} == EXPECTED_KEYS_IN_ORDER
    assert all(len({partition for partition, _ in changes}) == 1 for changes in by_key.values())
