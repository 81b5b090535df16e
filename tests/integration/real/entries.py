"""Reading a real Canal destination in tests: fetch until a condition holds, and describe entries."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from canalbridge.canal import CanalConnector
from canalbridge.protocol import EntryProtocol_pb2 as pb


def fetch_until(
    connector: CanalConnector,
    done: Callable[[Sequence[pb.Entry]], bool],
    timeout_s: float = 60.0,
    *,
    ack: bool = True,
) -> list[pb.Entry]:
    """Get batches (each acked when ``ack``) until ``done(entries so far)`` or the time is up (AssertionError)."""
    entries: list[pb.Entry] = []
    deadline = time.monotonic() + timeout_s
    while not done(entries):
        if time.monotonic() >= deadline:
            raise AssertionError(f"not done within {timeout_s} s; got {[describe(e) for e in entries]}")
        batch = connector.get_without_ack(1000, 500)  # the server waits up to 0.5 s for entries
        entries.extend(batch.entries)
        if ack:
            connector.ack(batch.batch_id)
    return entries


def row_change(entry: pb.Entry) -> pb.RowChange:
    return pb.RowChange.FromString(entry.storeValue)


def is_ddl(entry: pb.Entry) -> bool:
    return entry.entryType == pb.ROWDATA and row_change(entry).isDdl


@dataclass(frozen=True)
class Shape:
    """What a test asserts about an entry: its entry type, event type, schema and table."""

    entry_type: str
    event_type: str
    schema: str = ""
    table: str = ""


def describe(entry: pb.Entry) -> Shape:
    header = entry.header
    return Shape(
        pb.EntryType.Name(entry.entryType),
        pb.EventType.Name(header.eventType),
        header.schemaName,
        header.tableName,
    )
