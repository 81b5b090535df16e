"""What every fault test checks at the end, and the config tweak the changelog tests share."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from canalbridge.devkit.replay import row_changes
from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from spark_sink.identifiers import quote_table


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
    """The changelog target holds every change of ``name`` in ``entries``, none twice."""
    log = spark.table(quote_table(target))
    want = sum(2 if event == entry_pb.EventType.UPDATE else 1 for table, event, _ in row_changes(entries)
               if table == name)
    assert log.count() == want, "changes missing or appended twice"
    seen = Counter(tuple(r) for r in log.select("_journal", "_offset", "_seq", "_op").collect())
    assert max(seen.values()) == 1
