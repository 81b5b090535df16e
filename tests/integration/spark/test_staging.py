"""Staged rows reach Spark from files under the spill directory, however few, and leave with ``clear``.

Either as Parquet files the executors read by path, or as Arrow files the
driver reads whole and ships in the tasks (a cluster's default), which no
executor ever opens.
"""

from __future__ import annotations

import pytest

from spark_sink.decode import RAW_FIELDS
from spark_sink.staging import Staging

ROUTES = pytest.mark.parametrize("through_driver", [False, True], ids=["files", "driver"])


@ROUTES
def test_rows_given_as_tuples_or_by_field_read_back_in_order_from_files(spark, tmp_path, through_driver):
    staging = Staging((("_op", "string"), ("_seq", "bigint")), spill_rows=3, spill_dir=tmp_path / "t",
                      through_driver=through_driver)
    staging.add([("U", 1, "a", None), ("D", 2, "b", "x")])
    staging.add_columns([["U", "U"], range(3, 5), ["c", "d"], ["y", "z"]])  # the third row spills
    staging.add([("U", 5, "e", "w")])  # stays in memory until the DataFrame is asked for
    frame = staging.to_dataframe(spark)
    # A small commit is read from a file too; through the driver, every spill goes to one stream.
    assert len(list((tmp_path / "t").iterdir())) == (1 if through_driver else 2)
    assert [tuple(r) for r in frame.orderBy("_seq").collect()] == [
        ("U", 1, "a", None), ("D", 2, "b", "x"), ("U", 3, "c", "y"), ("U", 4, "d", "z"), ("U", 5, "e", "w")]
    assert staging.count == 5
    staging.clear()
    assert staging.count == 0 and not (tmp_path / "t").exists()  # the directory is the staging's own


@ROUTES
def test_row_change_bytes_stay_bytes(spark, tmp_path, through_driver):
    staging = Staging(RAW_FIELDS, spill_rows=50_000, spill_dir=tmp_path / "raw", through_driver=through_driver)
    staging.add_columns([range(1, 3), ["mysql-bin.000001"] * 2, [4, 90], [1000, 2000], [b"\x00\xff", b""]])
    rows = staging.to_dataframe(spark).orderBy("_entry").collect()
    assert [(r._offset, bytes(r._store_value)) for r in rows] == [(4, b"\x00\xff"), (90, b"")]


def test_rows_staged_through_the_driver_need_no_file_once_read(spark, tmp_path):
    """What an executor on another host gets: the rows inside its tasks, not a path it cannot open."""
    staging = Staging((("_seq", "bigint"),), spill_rows=2, spill_dir=tmp_path / "t", through_driver=True)
    staging.add([(seq, f"v{seq}") for seq in range(5)])
    frame = staging.to_dataframe(spark)
    for path in (tmp_path / "t").iterdir():
        path.unlink()
    assert sorted(tuple(r) for r in frame.collect()) == [(seq, f"v{seq}") for seq in range(5)]
    assert frame.count() == 5  # computed again, still from the driver


def test_rows_staged_as_files_are_read_by_path(spark, tmp_path):
    """The contrast: a Parquet staging that lost its files fails (never an empty commit)."""
    staging = Staging((("_seq", "bigint"),), spill_rows=2, spill_dir=tmp_path / "t")
    staging.add([(seq, f"v{seq}") for seq in range(5)])
    frame = staging.to_dataframe(spark)
    for path in (tmp_path / "t").iterdir():
        path.unlink()
    with pytest.raises(Exception, match=r"(?i)not exist|FileNotFound"):
        frame.collect()
