"""The status document and its text form."""

from __future__ import annotations

import dataclasses
import shlex

from canalbridge.daemon.status import job_json, render_text, snapshot_line, verify_lines
from canalbridge.sync.channel.maintenance import MaintenanceReport, MaintenanceRun
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.record import ChannelRecord, JobRecord, JobState
from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.snapshot.progress import SnapshotStatus
from canalbridge.sync.snapshot.verify import Difference, TableCheck
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.table import slow_layout_note

NOTE = "write.delete.mode is copy-on-write: every commit rewrites each data file holding a changed key"


def test_a_channel_whose_target_layout_slows_commits_carries_the_note_in_json_and_text():
    record = JobRecord("shop", JobState.RUNNING, (
        ChannelRecord("shop.orders", "lake.shop.orders", EntryPosition("mysql-bin.000001", 4), NOTE),
        ChannelRecord("shop.users", "lake.shop.users"),
    ))
    document = {"live": True, "jobs": [job_json(record, None)]}
    assert [c["layout_note"] for c in document["jobs"][0]["channels"]] == [NOTE, None]
    lines = render_text(document).splitlines()
    orders = lines.index("  shop.orders -> lake.shop.orders  (mysql-bin.000001:4)")
    assert lines[orders + 1] == f"    slow commits: {NOTE}"
    assert lines[orders + 2] == "  shop.users -> lake.shop.users  (nothing committed)"


def test_the_last_maintenance_run_shows_when_it_ran_and_what_it_did_or_why_it_failed():
    done = MaintenanceRun(1_795_500_000_000, 12.34, MaintenanceReport(40, 3, 25, 0, 180))
    failed = MaintenanceRun(1_795_500_000_000, 0.5, None, "rewrite_data_files: no space left")
    assert done.describe() == ("2026-11-24T06:00:00Z (12.3 s): data files 40 -> 3, delete files 25 -> 0, "
                               "180 snapshots expired")
    assert failed.describe() == "2026-11-24T06:00:00Z (0.5 s): failed: rewrite_data_files: no space left"
    record = JobRecord("shop", JobState.RUNNING, (
        ChannelRecord("shop.orders", "lake.shop.orders", None, None, failed.describe()),))
    document = {"live": True, "jobs": [job_json(record, None)]}
    assert document["jobs"][0]["channels"][0]["maintenance"] == failed.describe()
    assert f"    last maintenance: {failed.describe()}" in render_text(document).splitlines()


def test_slow_layouts_are_format_v1_and_copy_on_write_which_is_icebergs_default():
    merge_on_read = {"format-version": "2", "write.delete.mode": "merge-on-read"}
    assert slow_layout_note(merge_on_read, "write.delete.mode") is None
    assert "write.merge.mode is copy-on-write" in (slow_layout_note(merge_on_read, "write.merge.mode") or "")
    assert "copy-on-write" in (slow_layout_note({"format-version": "2"}, "write.delete.mode") or "")
    v1 = slow_layout_note({"format-version": "1", "write.delete.mode": "merge-on-read"}, "write.delete.mode")
    assert v1 is not None and v1.startswith("Iceberg format v1")


def test_status_lists_under_each_pattern_the_tables_it_maps_with_their_positions():
    settings = JobSettings("shop", CanalSettings("h", 1, "d"), (
        ChannelSettings("shop.users", "lake.shop.users"),
        ChannelSettings("shop.*", "lake.shop.{table}", pattern=TablePattern("shop.*")),
        ChannelSettings("eu_*.orders", "lake.eu.orders", pattern=TablePattern("eu_*.orders")),
    ))
    record = JobRecord("shop", JobState.RUNNING, (
        ChannelRecord("shop.users", "lake.shop.users"),
        ChannelRecord("shop.orders", "lake.shop.orders", EntryPosition("mysql-bin.000001", 4), rule="shop.*"),
        ChannelRecord("shop.items", "lake.shop.items", EntryPosition("mysql-bin.000002", 8), rule="shop.*"),
    ))
    document = {"live": True, "jobs": [job_json(record, settings)]}
    assert [c["rule"] for c in document["jobs"][0]["channels"]] == ["shop.*", "shop.*", None]
    text = render_text(document)
    assert ("  shop.users -> lake.shop.users  (nothing committed)\n"
            "  pattern shop.* -> lake.shop.{table}: 2 tables so far\n"
            "    shop.items -> lake.shop.items  (mysql-bin.000002:8)\n"
            "    shop.orders -> lake.shop.orders  (mysql-bin.000001:4)\n"
            "  pattern eu_*.orders -> lake.eu.orders: 0 tables so far\n") in text


def test_an_offline_state_says_when_it_was_recorded_and_that_the_daemon_is_not_running():
    recorded = JobRecord("shop", JobState.RUNNING, (), updated_ms=1_795_500_000_000)
    never_run = JobRecord("new", JobState.PENDING, ())
    document = {"live": False, "jobs": [job_json(recorded, None), job_json(never_run, None)]}
    lines = render_text(document).splitlines()
    assert lines[0] == "daemon: not running (what it last recorded in its state store)"
    assert "job shop: RUNNING (as of 2026-11-24T06:00:00Z, daemon not running)" in lines
    assert "job new: PENDING (never run from this state directory)" in lines
    live = render_text({"live": True, "jobs": [job_json(recorded, None)]}).splitlines()
    assert live[:2] == ["daemon: running", "job shop: RUNNING"]


def test_a_snapshot_line_says_how_far_the_table_is_against_the_servers_estimate_and_the_time_left():
    reading = SnapshotStatus("reading", chunks=3, rows=300, done="300", last="1000", rows_per_second=50.0,
                             rows_done=400, rows_estimate=1000, seconds_left=720.0)
    record = JobRecord("shop", JobState.RUNNING, (
        ChannelRecord("shop.orders", "lake.shop.orders", snapshot=reading),))
    line = render_text({"live": True, "jobs": [job_json(record, None)]}).splitlines()[-1]
    assert line == ("    snapshot: reading, 3 chunks, 300 rows in this run (50 rows/s), 400 of about 1000 rows, "
                    "about 12 min left, through key (300) of (1000)")
    back_fill = SnapshotStatus("reading", chunks=1, rows=10, done="10", last="90", rows_per_second=5.0, rows_done=10)
    assert snapshot_line(dataclasses.asdict(back_fill)) == ("reading, 1 chunks, 10 rows in this run (5 rows/s), "
                                                            "through key (10) of (90)")


def test_a_verify_shows_each_chunk_that_differs_with_a_repair_command_a_shell_takes_as_printed():
    where = "((`name` > _utf8mb4 X'61')) AND ((`name` <= _utf8mb4 X'7a'))"  # (backquotes: not for a shell to run)
    differs = TableCheck("v1", "differs", 4, 400, (Difference("a", "z", 3, ("b", "c"), where),))
    record = JobRecord("shop", JobState.RUNNING, (ChannelRecord("shop.users", "lake.shop.users", verify=differs),))
    lines = render_text({"live": True, "jobs": [job_json(record, None)]}).splitlines()[-3:]
    assert lines[:2] == ["    verify: differs, 4 chunks, 400 rows compared",
                         "      keys after (a) through (z): 3 keys differ: (b), (c), ..."]
    command = lines[2].split("repair: ", 1)[1]
    assert shlex.split(command) == ["canalbridge", "snapshot", "shop", "shop.users", "--where", where]
    one = verify_lines("shop", "shop.users", dataclasses.asdict(TableCheck("v2", "differs", 1, 9, (
        Difference(None, "9", 1, ("4",), "((`id` <= 9))"),))), "/etc/canal bridge.toml")
    assert one[1] == "  keys through (9): 1 key differs: (4)"
    assert shlex.split(one[2].split("repair: ", 1)[1])[2:4] == ["-c", "/etc/canal bridge.toml"]
