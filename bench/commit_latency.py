"""Commit latency of the Iceberg upsert writer for N staged rows (Spark local[2]).

For each size, rows of a 10-column table are staged through the writer
(spilling to Parquet past spill_rows) and committed with one MERGE INTO into
the table the previous sizes filled: keys start half a batch back, so a
batch updates the rows already there and inserts the rest. The first size
also pays for creating the table and warming the JVM. Prints one JSON line
per size, then a summary line.

    .venv/bin/python -m bench.commit_latency --sizes 10000,100000,1000000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from bench.common import local_spark_settings, make_rows
from canalbridge.daemon.logs import configure_logging
from canalbridge.devkit.catalog import narrow_table
from canalbridge.sync.model.changes import RowBatch, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings
from spark_sink.session import get_spark, stop_spark
from spark_sink.sink import make_writer

TABLE = narrow_table(columns=10)
SEND_ROWS = 5000  # rows per send, as a channel would hand them over


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    configure_logging("warning")
    root = tempfile.mkdtemp(prefix="canalbridge-bench-")
    settings = local_spark_settings(root)
    spark = get_spark(settings)
    columns = tuple(SourceColumn(c.name, c.mysql_type.declared, 0, c.is_key) for c in TABLE.columns)
    names = tuple(c.name for c in TABLE.columns)
    writer = make_writer(spark, ChannelSettings(TABLE.qualified, "lake.bench.events"), "bench", settings)
    results = {}
    next_key, offset = 0, 4
    for size in (int(s) for s in args.sizes.split(",")):
        # Half the batch updates rows already in the table, half inserts new ones.
        start_key = max(next_key - size // 2, 0)
        rows = make_rows(start_key, size, offset)
        writer.begin()
        started = time.perf_counter()
        for index in range(0, size, SEND_ROWS):
            writer.send(RowBatch(TABLE.qualified, names, columns, (0,), tuple(rows[index:index + SEND_ROWS])))
        staged = time.perf_counter() - started
        started = time.perf_counter()
        writer.commit(EntryPosition("mysql-bin.000001", offset), f"bench-{size}")
        commit_s = time.perf_counter() - started
        next_key = start_key + size
        offset += 1000
        total = spark.table("lake.bench.events").count()
        results[size] = round(commit_s, 2)
        print(json.dumps({"staged_rows": size, "stage_s": round(staged, 2), "commit_s": round(commit_s, 2),
                          "rows_per_s": round(size / commit_s), "table_rows": total}), flush=True)
    stop_spark()
    print(json.dumps({"benchmark": "commit_latency", "commit_s_by_staged_rows": results}))


if __name__ == "__main__":
    main()
