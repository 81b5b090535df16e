"""The canal-python 0.4 reference: drain a dev server destination, parse every entry and read every value.

Runs in its own process with the pure-Python protobuf backend, the only one
under which canal-python 0.4's generated modules load with protobuf >= 4
(and protobuf 3.20, the last that accepts them natively, has no binary
wheel for Python 3.11). Prints one JSON line: rows, seconds, rows_per_s.

    PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python python canal_python_reference.py PORT DESTINATION ROWS BATCH
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

from canal.client import Client
from canal.protocol import EntryProtocol_pb2


def main(port: int, destination: str, expected_rows: int, batch_size: int) -> int:
    client = Client()
    with contextlib.redirect_stdout(io.StringIO()):  # canal-python prints progress to stdout
        client.connect(host="127.0.0.1", port=port)
        client.check_valid(username=b"", password=b"")
        client.subscribe(client_id=b"1001", destination=destination.encode(), filter=b".*\\..*")
    rows = values = 0
    started = time.perf_counter()
    while rows < expected_rows:
        message = client.get(batch_size)  # getWithoutAck + ack, as canal-python's users do
        for entry in message["entries"]:
            if entry.entryType != EntryProtocol_pb2.EntryType.ROWDATA:
                continue
            change = EntryProtocol_pb2.RowChange()
            change.MergeFromString(entry.storeValue)
            # The same reading as bench.decode.protobuf_ceiling; it cannot be shared, as
            # canal-python's modules and ours cannot live in one process.
            for row_data in change.rowDatas:
                rows += 1
                before = [None if c.isNull else c.value for c in row_data.beforeColumns]
                after = [None if c.isNull else c.value for c in row_data.afterColumns]
                values += len(before) + len(after)
    elapsed = time.perf_counter() - started
    client.disconnect()
    print(json.dumps({"rows": rows, "values": values, "seconds": round(elapsed, 3),
                      "rows_per_s": round(rows / elapsed)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
