"""Drain a destination with canal-python 0.4 and write what it saw as JSON.

Runs in its own process (canal-python's modules need the pure-Python
protobuf backend and clash with ours). Uses only canal-python's client and
its own decoding, so the dev server is checked by a client nobody here wrote.

    python canal_python_drain.py PORT DESTINATION EXPECTED_ENTRIES OUT.json
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

from canal.client import Client
from canal.protocol import EntryProtocol_pb2


def main(port: int, destination: str, expected_entries: int, out_path: str) -> int:
    client = Client()
    quiet = io.StringIO()  # canal-python prints progress to stdout
    with contextlib.redirect_stdout(quiet):
        client.connect(host="127.0.0.1", port=port)
        client.check_valid(username=b"", password=b"")
        client.subscribe(client_id=b"1001", destination=destination.encode(), filter=b".*\\..*")
    tables: dict[str, dict[str, dict]] = {}
    entry_types: dict[str, int] = {}
    batches = rows = entries = 0
    deadline = time.monotonic() + 120
    while entries < expected_entries and time.monotonic() < deadline:
        message = client.get(100)  # getWithoutAck + ack, as canal-python does
        if not message["id"]:
            time.sleep(0.01)  # canal-python's get cannot wait on the server side
            continue
        entries += len(message["entries"])
        batches += 1
        for entry in message["entries"]:
            name = EntryProtocol_pb2.EntryType.Name(entry.entryType)
            entry_types[name] = entry_types.get(name, 0) + 1
            if entry.entryType != EntryProtocol_pb2.EntryType.ROWDATA:
                continue
            change = EntryProtocol_pb2.RowChange()
            change.MergeFromString(entry.storeValue)
            table = tables.setdefault(f"{entry.header.schemaName}.{entry.header.tableName}", {})
            for row_data in change.rowDatas:
                rows += 1
                if change.eventType in (EntryProtocol_pb2.EventType.UPDATE, EntryProtocol_pb2.EventType.DELETE):
                    table.pop(_key(row_data.beforeColumns), None)
                if change.eventType in (EntryProtocol_pb2.EventType.INSERT, EntryProtocol_pb2.EventType.UPDATE):
                    table[_key(row_data.afterColumns)] = {
                        c.name: None if c.isNull else c.value for c in row_data.afterColumns
                    }
    client.disconnect()
    with open(out_path, "w", encoding="utf-8") as out:
        summary = {"entries": entries, "rows": rows, "batches": batches, "entry_types": entry_types}
        json.dump({**summary, "tables": tables}, out)
    return 0


def _key(columns) -> str:
    return json.dumps([None if c.isNull else c.value for c in columns if c.isKey])


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]))
