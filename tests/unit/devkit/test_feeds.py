"""Benchmark feeds: a file repeated into later binlog files, and a paced, time-stamped release."""

from __future__ import annotations

import itertools
import time

from canalbridge.devkit.catalog import narrow_table
from canalbridge.devkit.entry_file import write_entries
from canalbridge.devkit.feeds import paced, repeated, rows_in
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.sync.model.position import EntryPosition


def saved(tmp_path, rows=200):
    entries = list(Workload(WorkloadSpec(tables=(narrow_table(),), row_changes=rows, seed=3)))
    path = tmp_path / "w.entries"
    write_entries(path, entries)
    return path, entries


def test_repeated_rounds_follow_each_other_in_binlog_order(tmp_path):
    path, entries = saved(tmp_path)
    replayed = list(repeated(path, 3))
    assert len(replayed) == 3 * len(entries)
    positions = [EntryPosition.of(e) for e in replayed]
    assert all(a < b for a, b in itertools.pairwise(positions))
    assert replayed[len(entries)].header.logfileName == "mysql-bin.001001"
    assert replayed[len(entries)].storeValue == entries[0].storeValue


def test_rows_in_counts_row_changes_not_entries(tmp_path):
    _, entries = saved(tmp_path)
    assert sum(rows_in(e) for e in entries) == 200


def test_paced_release_keeps_the_rate_and_stamps_release_time(tmp_path):
    _, entries = saved(tmp_path)
    before = int(time.time() * 1000)
    started = time.monotonic()
    released = list(paced(entries, rows_per_s=4000))  # 200 rows: about 50 ms
    elapsed = time.monotonic() - started
    assert elapsed >= 199 / 4000
    stamps = [e.header.executeTime for e in released]
    assert stamps == sorted(stamps) and stamps[0] >= before and stamps[-1] <= int(time.time() * 1000)
