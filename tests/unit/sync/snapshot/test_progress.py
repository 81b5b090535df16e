"""A table's snapshot progress survives its round trip through the target with every key type intact; a merged
target's status adds its tables up; a stored progress is checked as the untrusted input it is."""

from __future__ import annotations

import datetime
import decimal
import json

import pytest

from canalbridge.sync.errors import ProgressFormatError
from canalbridge.sync.snapshot.progress import (
    SnapshotStatus,
    TableProgress,
    combined,
    progress_from_json,
    progress_to_json,
)

KEYS = [
    (1,), (-(2**63),), (2**64 - 1,),
    ("it's \\ 😀",), ("",),
    (b"\x00\xff",),
    (decimal.Decimal("-12.50"),), (decimal.Decimal("1E+3"),),
    (datetime.datetime(2024, 1, 2, 3, 4, 5, 6),), (datetime.date(1, 1, 1),),
    (datetime.timedelta(hours=-838, minutes=-59, seconds=-59, microseconds=-999),),
    (7, "x", b"\x01", datetime.date(2024, 2, 29)),
]


@pytest.mark.parametrize("key", KEYS)
def test_every_key_type_reads_back_as_the_value_and_type_it_was(key):
    progress = TableProgress("snap-1", "db.t", last=key, done=key)
    again = TableProgress.from_json(progress.to_json())
    assert again == progress
    assert [type(v) for v in again.done or ()] == [type(v) for v in key]


def test_a_table_is_finished_once_the_chunk_through_its_last_key_landed_or_when_it_was_empty():
    started = TableProgress("snap-1", "db.t", last=(100,))
    assert not started.finished and started.done is None
    assert not started.advanced((50,)).finished
    assert started.advanced((100,)).finished
    assert TableProgress("snap-1", "db.empty", last=None).finished


@pytest.mark.parametrize("text", [
    "", "{}", '{"snapshot": "s", "table": "t", "last": [["float", "1.5"]], "done": null}',
    '{"snapshot": "s", "table": "t", "last": 5, "done": null}',
    '{"snapshot": "s", "table": "t", "last": [["decimal", "x"]], "done": null}',
    '{"snapshot": "s", "table": "t", "last": [["str", 5]], "done": null}',
])
def test_progress_this_version_cannot_read_is_a_typed_error(text):
    with pytest.raises(ProgressFormatError, match="cannot read"):
        TableProgress.from_json(text)


def test_a_value_no_key_holds_cannot_be_stored():
    with pytest.raises(ValueError, match="no key value"):
        TableProgress("s", "t", last=(1.5,)).to_json()


def test_the_key_the_values_are_of_is_kept_and_every_tables_progress_round_trips_as_one_text():
    orders = TableProgress("snap-1", "db.orders", last=(7, 100), key=("tenant", "id")).advanced((7, 50))
    accounts = TableProgress("snap-2", "db.accounts", last=None)
    stored = progress_from_json(progress_to_json({"db.orders": orders, "db.accounts": accounts}))
    assert stored == {"db.orders": orders, "db.accounts": accounts}
    assert stored["db.orders"].key == ("tenant", "id") and progress_from_json(None) == {}
    with pytest.raises(ProgressFormatError):
        progress_from_json('["not", "a", "map"]')



def test_a_back_fills_filter_is_kept_as_it_advances_and_progress_stored_without_one_reads_back():
    back_fill = TableProgress("snap-3", "db.orders", last=(90,), key=("id",), where="created < '2024-01-01'")
    assert back_fill.advanced((40,)).where == "created < '2024-01-01'"
    assert TableProgress.from_json(back_fill.advanced((40,)).to_json()) == back_fill.advanced((40,))
    plain = TableProgress("snap-4", "db.orders", last=(90,))
    assert "where" not in plain.to_json()  # (what earlier versions wrote, and read)
    assert TableProgress.from_json(plain.to_json()).where is None


def test_the_rows_landed_add_up_over_chunks_and_progress_stored_without_them_reads_back_with_none():
    progress = TableProgress("snap-5", "db.orders", last=(90,), key=("id",)).advanced((40,), 40).advanced((90,), 38)
    assert progress.rows == 78 and TableProgress.from_json(progress.to_json()) == progress
    earlier = '{"done": null, "key": ["id"], "last": [["int", "90"]], "snapshot": "snap-6", "table": "db.orders"}'
    assert TableProgress.from_json(earlier).rows == 0  # (as versions before the count wrote it)


def test_a_merged_targets_snapshot_adds_its_tables_up_and_reads_until_the_last_is_done():
    done = SnapshotStatus("finished", 2, 40, "(40)", "(40)", 100.0, 40, 40)
    reading = SnapshotStatus("reading", 1, 20, "(20)", "(90)", 50.0, 20, 90, 1.4)
    waiting = SnapshotStatus("waiting")
    assert combined([done, reading]) == SnapshotStatus("reading", 3, 60, None, None, 50.0, 60, 130, 1.4), (
        "the rate of the shard being read, not the finished one's too")
    assert combined([done, waiting]).phase == "reading", "a table is left"
    assert combined([reading, waiting]).seconds_left is None, "no rate yet for the table still waiting"
    assert combined([done, done]).phase == "finished" and combined([done, done]).seconds_left is None
    assert combined([done, SnapshotStatus("cancelled")]).phase == "cancelled"
    assert combined([done, SnapshotStatus("gone")]).phase == "finished", "a dropped shard leaves nothing to do"


def test_a_rebuilds_progress_before_its_keys_are_planned_is_not_finished_and_reads_back_as_such():
    unplanned = TableProgress("s1", "db.t", None, key=("id",), planned=False)
    assert not unplanned.finished
    assert TableProgress.from_json(unplanned.to_json()) == unplanned
    assert "planned" not in TableProgress("s1", "db.t", None).to_json()  # (stamps of earlier versions read alike)
    assert TableProgress.from_json(TableProgress("s1", "db.t", None).to_json()).finished


@pytest.mark.parametrize(("stored", "says"), [
    # A filter that would end the snapshot's condition and read another table into the lake.
    ({"where": "0) UNION SELECT secret, 1 FROM shop.payroll WHERE (1"}, "a filter that is not one condition"),
    ({"where": "1; DROP TABLE t"}, "a filter that is not one condition"),
    ({"last": [["decimal", "NaN"]]}, "a decimal key value MySQL cannot hold"),
    ({"last": [["decimal", "1E+999999999"]]}, "a decimal key value MySQL cannot hold"),
    ({"snapshot": "x' OR '1"}, "a snapshot id"),
])
def test_a_stored_progress_is_refused_before_any_of_it_reaches_the_source(stored, says):
    # What a target's summary holds, anyone who can commit to the table can write.
    text = json.dumps({"snapshot": "0a1b2c3d4e5f", "table": "shop.orders", "last": [["int", "9"]], "done": None,
                       "key": ["id"], **stored})
    with pytest.raises(ProgressFormatError, match=says):
        TableProgress.from_json(text)


def test_a_back_fills_filter_reads_back_as_it_was_checked():
    stored = TableProgress("0a1b2c3d4e5f", "shop.orders", (9,), key=("id",), where="note = 'it''s (1)'")
    assert TableProgress.from_json(stored.to_json()) == stored
