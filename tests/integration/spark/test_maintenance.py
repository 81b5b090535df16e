"""A sink's table maintenance: compaction and snapshot expiry that keep the rows and the position."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.sync.settings import ChannelSettings, MaintenanceSettings
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from spark_sink.stamp import read_stamp
from spark_sink.table import TargetTable
from tests.integration.spark.test_position_readback import JOB, commit, position

EXPIRE_ALL = MaintenanceSettings(keep_snapshots_hours=0)


def live_files(spark, target: str) -> dict[str, int]:
    """Live data and delete files of main, counted apart from the code under test."""
    rows = spark.sql(f"SELECT content, count(*) AS n FROM {quote_table(target)}.files GROUP BY content").collect()
    kinds = {0: "data", 1: "position_deletes", 2: "equality_deletes"}
    return {kinds[row["content"]]: row["n"] for row in rows}


def snapshot_times(spark, target: str) -> list[int]:
    rows = spark.sql(f"SELECT unix_millis(committed_at) AS ms FROM {quote_table(target)}.snapshots").collect()
    return sorted(row["ms"] for row in rows)


def table_rows(spark, target: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.table(quote_table(target)).collect())


@pytest.mark.parametrize("mode, deletes", [("upsert", "position"), ("upsert", "equality"), ("changelog", None)])
def test_maintenance_compacts_expires_and_keeps_rows_and_position(spark, spark_settings, mode, deletes):
    target = f"lake.maintenance_{mode}_{deletes}.t"
    settings = dataclasses.replace(spark_settings, upsert_deletes=deletes) if deletes else spark_settings
    sink = make_sink(spark, ChannelSettings("db.t", target, mode=mode), JOB, settings)
    for n in range(8):  # overlapping keys: each upsert commit deletes rows of earlier files
        commit(sink, f"l{n}", position(100 * (n + 1)), *[(key, f"v{n}") for key in range(n * 3, n * 3 + 10)])
    before = live_files(spark, target)
    rows = table_rows(spark, target)
    kept_from = read_stamp(TargetTable(spark, target), JOB).committed_ms

    report = sink.maintainer.maintain(EXPIRE_ALL)

    after = live_files(spark, target)
    assert (report.data_files_before, report.data_files_after) == (before["data"], after["data"])
    assert after["data"] < before["data"] and before["data"] >= 8
    if deletes is not None:
        assert before[f"{deletes}_deletes"] >= 7
    deleted = before.get("position_deletes", 0) + before.get("equality_deletes", 0)
    assert (report.delete_files_before, report.delete_files_after) == (deleted, 0)
    assert set(after) == {"data"}
    assert table_rows(spark, target) == rows
    # Everything older than the snapshot holding the position went; it and its descendants stay.
    assert report.snapshots_expired > 0 and snapshot_times(spark, target)[0] == kept_from
    assert sink.state.read_state().position == position(800)
    commit(sink, "l9", position(900), (1, "after"))
    assert sink.state.read_state().position == position(900)
    assert len(table_rows(spark, target)) == len(rows) + (mode == "changelog")


def test_snapshots_inside_the_kept_window_stay(spark, spark_settings):
    target = "lake.maintenance_window.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    for n in range(3):
        commit(sink, f"l{n}", position(100 * (n + 1)), (n, "v"))
    count = len(snapshot_times(spark, target))
    report = sink.maintainer.maintain(MaintenanceSettings(keep_snapshots_hours=1))
    assert report.snapshots_expired == 0
    assert len(snapshot_times(spark, target)) >= count


def test_a_table_not_created_yet_has_nothing_to_maintain(spark, spark_settings):
    sink = make_sink(spark, ChannelSettings("db.t", "lake.maintenance_none.t"), JOB, spark_settings)
    assert sink.maintainer.maintain(EXPIRE_ALL).snapshots_expired == 0
