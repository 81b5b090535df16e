"""Staged rows reach Spark as Parquet files under the spill directory, however few, and leave with ``clear``."""

from __future__ import annotations

from spark_sink.decode import RAW_FIELDS
from spark_sink.staging import Staging


def test_rows_given_as_tuples_or_by_field_read_back_in_order_from_files(spark, tmp_path):
    staging = Staging((("_op", "string"), ("_seq", "bigint")), spill_rows=3, spill_dir=tmp_path / "t")
    staging.add([("U", 1, "a", None), ("D", 2, "b", "x")])
    staging.add_columns([["U", "U"], range(3, 5), ["c", "d"], ["y", "z"]])  # the third row spills
    staging.add([("U", 5, "e", "w")])  # stays in memory until the DataFrame is asked for
    frame = staging.to_dataframe(spark)
    assert len(list((tmp_path / "t").iterdir())) == 2  # a small commit is read from a file too
    assert [tuple(r) for r in frame.orderBy("_seq").collect()] == [
        ("U", 1, "a", None), ("D", 2, "b", "x"), ("U", 3, "c", "y"), ("U", 4, "d", "z"), ("U", 5, "e", "w")]
    assert staging.count == 5
    staging.clear()
    assert staging.count == 0 and not (tmp_path / "t").exists()  # the directory is the staging's own


def test_row_change_bytes_stay_bytes(spark, tmp_path):
    staging = Staging(RAW_FIELDS, spill_rows=50_000, spill_dir=tmp_path / "raw")
    staging.add_columns([range(1, 3), ["mysql-bin.000001"] * 2, [4, 90], [1000, 2000], [b"\x00\xff", b""]])
    rows = staging.to_dataframe(spark).orderBy("_entry").collect()
    assert [(r._offset, bytes(r._store_value)) for r in rows] == [(4, b"\x00\xff"), (90, b"")]
