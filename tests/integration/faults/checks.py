"""What every fault test checks at the end, and the config tweak the changelog tests share."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from spark_sink.identifiers import quote_table
from tests.infra.replay import row_changes


def changelog_config(path: Path, table_name: str) -> None:
    """Make the channel whose target is ``table_name`` a changelog channel."""
    parts = path.read_text().split("[[job.channel]]")
    for index, part in enumerate(parts):
        if f'.{table_name}"' in part:
            parts[index] = part.rstrip("\n") + '\nmode = "changelog"\n'
    path.write_text("[[job.channel]]".join(parts))


def assert_upsert_exact(spark, workload, name: str, target: str) -> None:
    """The upsert target holds exactly the rows the source ends with."""
    expected = workload.expected[name]
    assert read_typed(spark, target, expected.table) == expected_typed(expected.table, expected.rows.values())


def assert_changelog_once(spark, entries, name: str, target: str) -> None:
    """The changelog target holds each change of ``name`` in ``entries`` once, binlog position by position.

    ``entries`` come from a second reader of the same binlog through Canal. When Canal's MySQL
    connection breaks (a MariaDB restart), it sends part of the binlog again in the same stream
    (docs/guide/limits.md#canal-lost-connection), so each position counts once.
    """
    want: Counter = Counter()
    positions = set()
    for entry in entries:
        position = (entry.header.logfileName, entry.header.logfileOffset)
        if position in positions:
            continue
        positions.add(position)
        for table, event, _ in row_changes([entry]):
            if table == name:
                want[position] += 2 if event == entry_pb.EventType.UPDATE else 1
    rows = spark.sql(f"SELECT _journal, _offset, count(*) AS n FROM {quote_table(target)} GROUP BY 1, 2").collect()
    got = Counter({(row["_journal"], row["_offset"]): row["n"] for row in rows})
    wrong = sorted(position for position in want.keys() | got.keys() if want[position] != got[position])
    assert not wrong, f"changes missing or appended twice at {[(p, want[p], got[p]) for p in wrong[:5]]}"
