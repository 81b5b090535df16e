"""Signal rows as the stream routes them, for the unit tests of the snapshot's windows."""

from __future__ import annotations

import json

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db import Signal


def signal(window: str, kind: str, event: entry_pb.EventType.ValueType = entry_pb.EventType.INSERT
           ) -> entry_pb.RowChange:
    """The row change of window ``window``'s ``kind`` signal row (its INSERT, or its DELETE when cleared)."""
    values = {"id": Signal(window, kind, {}).row_id, "kind": kind, "data": json.dumps({})}
    columns = [entry_pb.Column(name=name, value=value) for name, value in values.items()]
    row = entry_pb.RowData(afterColumns=columns) if event == entry_pb.EventType.INSERT else entry_pb.RowData(
        beforeColumns=columns)
    return entry_pb.RowChange(eventType=event, rowDatas=[row])
