"""A GET's ``Messages`` body read in one parse: the same entries as reading each one's bytes."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError

from canalbridge.canal.batch import EMPTY_BATCH_ID, parse_messages
from canalbridge.protocol import CanalProtocol_pb2 as packet_pb
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb


def entry(offset: int, table: str) -> entry_pb.Entry:
    change = entry_pb.RowChange(eventType=entry_pb.INSERT)
    change.rowDatas.add().afterColumns.add(name="id", value=str(offset), isKey=True)
    result = entry_pb.Entry(entryType=entry_pb.ROWDATA, storeValue=change.SerializeToString())
    result.header.logfileName, result.header.logfileOffset = "mysql-bin.000001", offset
    result.header.schemaName, result.header.tableName = "shop", table
    return result


def test_a_batch_holds_every_entry_of_the_body_in_order():
    entries = [entry(4 + 100 * n, f"t{n % 3}") for n in range(10)]
    raws = [e.SerializeToString() for e in entries]
    body = packet_pb.Messages(batch_id=42, messages=raws).SerializeToString()
    batch = parse_messages(body)
    assert batch.batch_id == 42
    assert list(batch.entries) == [entry_pb.Entry.FromString(raw) for raw in raws]
    assert all(type(e) is entry_pb.Entry for e in batch.entries)
    assert batch.raw_size == len(body) > sum(map(len, raws))


def test_an_empty_batch_has_no_entries():
    batch = parse_messages(packet_pb.Messages(batch_id=EMPTY_BATCH_ID).SerializeToString())
    assert batch.is_empty and batch.entries == () and batch.raw_size == 0


def test_an_entry_that_does_not_parse_fails_the_batch():
    good = entry(4, "t").SerializeToString()
    body = packet_pb.Messages(batch_id=7, messages=[good, b"\x0a\x05ab"]).SerializeToString()  # a header cut short
    with pytest.raises(DecodeError):
        parse_messages(body)
