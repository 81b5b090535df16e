"""Every MySQL type, from the dev server's generator through the writer into Iceberg and back."""

from __future__ import annotations

import datetime as dt
import json
import threading
from decimal import Decimal
from pathlib import Path

import pytest

from canalbridge.devkit.canal_values import ZERO_DATE
from canalbridge.devkit.catalog import ALL_TYPES_COLUMNS
from canalbridge.devkit.entries import BinlogWriter, TableDef, row_run
from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.settings import ChannelSettings
from spark_sink.errors import ValueConversionError
from spark_sink.sink import make_writer
from spark_sink.types import spark_type

UTC = dt.UTC
TABLE = TableDef("src", "all_types", ALL_TYPES_COLUMNS)


def extreme_rows() -> list[dict]:
    base = {c.name: None for c in ALL_TYPES_COLUMNS}
    maximal = dict(base, id=1, c_tinyint=-128, c_tinyint_u=255, c_smallint=32767, c_mediumint_u=16777215,
                   c_int=-2147483648, c_int_u=4294967295, c_bigint=-(2**63), c_bigint_u=2**64 - 1,
                   c_decimal=Decimal("-9999999999.99"), c_decimal_wide=Decimal("-12345678901234567890.1234567890"),
                   c_float=3.4028234663852886e38, c_double=-1.7976931348623157e308, c_char="ß😀",
                   c_varchar="中文😀𝄞 'quote' `tick` \\ back", c_text="", c_enum="blue", c_set="a,b,c,d",
                   c_json='{"a": [1, 2], "k": "😀"}', c_binary=b"\x00\xff\x00\x01",
                   c_varbinary=b"\x00\xff\x80\x7f", c_blob=bytes(range(256)), c_bit=4095, c_year=2155,
                   c_date=dt.date(9999, 12, 31), c_time=dt.timedelta(hours=-838, minutes=-59, seconds=-59),
                   c_datetime=dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                   c_datetime0=dt.datetime(1000, 1, 1), c_timestamp=dt.datetime(2038, 1, 19, 3, 14, 7, 999000, UTC))
    zeros = dict(base, id=2, c_date=ZERO_DATE, c_datetime=ZERO_DATE, c_datetime0=ZERO_DATE, c_varchar="",
                 c_set="", c_decimal=Decimal("0.00"), c_decimal_wide=Decimal("1.5"), c_enum="red",
                 c_time=dt.timedelta(microseconds=1000), c_varbinary=b"", c_float=-0.0, c_double=1e-300)
    nulls = dict(base, id=3)
    fractions = dict(base, id=4, c_datetime=dt.datetime(2020, 1, 2, 3, 4, 5, 1),
                     c_timestamp=dt.datetime(1970, 1, 1, 0, 0, 1, 123000, UTC), c_time=dt.timedelta(seconds=1.5),
                     c_decimal=Decimal("-0.50"), c_float=1.1, c_double=0.1)
    return [maximal, zeros, nulls, fractions]


def write_rows(spark, spark_settings, target: str, rows: list[dict], label: str = "t1", *,
               decoder: str = "python") -> None:
    """Insert ``rows`` in one commit: decoded by RowMapper, or as RowChange bytes for the JVM decoder
    (then one entry per row, so that the staged entries spill as rows do)."""
    binlog = BinlogWriter()
    writer = make_writer(spark, ChannelSettings(TABLE.qualified, target), "types", spark_settings)
    mapper = RowMapper(TABLE.qualified, None)
    writer.begin()
    if decoder == "jvm":
        assert writer.decodes_row_changes()
        entries = [binlog.rows(TABLE, entry_pb.EventType.INSERT, [(None, row)]) for row in rows]
        mapper.map(entry_pb.RowChange.FromString(entries[0].storeValue), EntryPosition.of(entries[0]))
        writer.send_raw(mapper.raw_batch(row_run(entries)))
    else:
        entries = [binlog.rows(TABLE, entry_pb.EventType.INSERT, [(None, row) for row in rows])]
        mapped = mapper.map(entry_pb.RowChange.FromString(entries[0].storeValue), EntryPosition.of(entries[0]))
        writer.send(mapper.batch(mapped))
    writer.commit(EntryPosition.of(entries[-1]), label)


@pytest.mark.parametrize("decoder", ["python", "jvm"])
def test_every_type_round_trips_with_extremes(spark, spark_settings, decoder):
    rows = extreme_rows()
    write_rows(spark, spark_settings, f"lake.types.extremes_{decoder}", rows, decoder=decoder)
    assert read_typed(spark, f"lake.types.extremes_{decoder}", TABLE) == expected_typed(TABLE, rows)


@pytest.mark.parametrize("decoder", ["python", "jvm"])
def test_generated_values_of_every_type_round_trip(spark, spark_settings, decoder):
    from canalbridge.devkit.workload import Workload, WorkloadSpec

    workload = Workload(WorkloadSpec(tables=(TABLE,), row_changes=400, insert_weight=1, update_weight=0,
                                     delete_weight=0, null_ratio=0.15, seed=11))
    list(workload)
    rows = list(workload.expected[TABLE.qualified].rows.values())
    write_rows(spark, spark_settings, f"lake.types.generated_{decoder}", rows, decoder=decoder)
    assert read_typed(spark, f"lake.types.generated_{decoder}", TABLE) == expected_typed(TABLE, rows)


def test_created_table_has_iceberg_types_and_properties(spark):
    described = {r["col_name"]: r["data_type"]
                 for r in spark.sql("DESCRIBE TABLE lake.types.extremes_python").collect()}
    for column in ALL_TYPES_COLUMNS:
        assert described[column.name] == spark_type(column.mysql_type.declared), column.name
    properties = {r["key"]: r["value"] for r in spark.sql("SHOW TBLPROPERTIES lake.types.extremes_python").collect()}
    assert properties["format-version"] == "2"
    assert properties["write.merge.mode"] == "merge-on-read"
    assert properties["write.metadata.delete-after-commit.enabled"] == "true"
    assert properties["canalbridge.primary-key"] == '["id"]'
    assert identifier_fields(spark, "lake.types.extremes_python") == ["id"]


def identifier_fields(spark, table: str) -> list[str]:
    """The current schema's Iceberg identifier fields, read from the table's newest metadata file."""
    (latest,) = spark.sql(f"SELECT file FROM {table}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1").collect()
    metadata = json.loads(Path(latest["file"].removeprefix("file:")).read_text())
    (schema,) = [s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"]]
    names = {field["id"]: field["name"] for field in schema["fields"]}
    return [names[field_id] for field_id in schema.get("identifier-field-ids", [])]


@pytest.mark.parametrize("thread", ["main", "other"])
def test_value_that_does_not_parse_is_a_named_error(spark, spark_settings, thread):
    """Also from a thread of its own, as a channel's, whose JVM thread has no active session until told
    (Spark's defaults there have ANSI off: the value became NULL and the commit went through)."""
    from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch, SourceColumn

    target = f"lake.types.bad_{thread}"
    writer = make_writer(spark, ChannelSettings("src.bad", target), "types", spark_settings)
    columns = (SourceColumn("id", "int(11)", 4, True), SourceColumn("n", "int(11)", 4, False))
    position = EntryPosition("mysql-bin.000001", 4)
    row = ChangeRow(ChangeKind.INSERT, ("1", "abc"), position)
    failures: list[BaseException] = []

    def commit() -> None:
        writer.begin()
        writer.send(RowBatch("src.bad", ("id", "n"), columns, (0,), (row,)))
        try:
            writer.commit(position, "bad")
        except BaseException as exc:
            failures.append(exc)

    if thread == "main":
        commit()
    else:
        worker = threading.Thread(target=commit)
        worker.start()
        worker.join(300)
        assert not worker.is_alive()
    (failure,) = failures
    assert isinstance(failure, ValueConversionError), failure
    assert target in str(failure) and "abc" in str(failure)
    assert not failure.transient


@pytest.mark.parametrize("decoder", ["python", "jvm"])
def test_large_transaction_spills_to_parquet_and_commits_once(spark, spark_settings, decoder):
    from pathlib import Path

    from canalbridge.devkit.workload import Workload, WorkloadSpec

    workload = Workload(WorkloadSpec(tables=(TABLE,), row_changes=1300, insert_weight=1, update_weight=0,
                                     delete_weight=0, null_ratio=0.1, seed=21))
    list(workload)
    rows = list(workload.expected[TABLE.qualified].rows.values())
    assert len(rows) > 2 * spark_settings.spill_rows
    target = f"lake.types.spilled_{decoder}"
    write_rows(spark, spark_settings, target, rows, decoder=decoder)
    assert read_typed(spark, target, TABLE) == expected_typed(TABLE, rows)
    # One change of main: the upsert writer's snapshots on its branch reach main in one fast-forward.
    assert spark.sql(f"SELECT count(*) AS n FROM {target}.history").first()["n"] == 1
    table_dir = Path(spark_settings.spill_dir) / "types" / target  # a directory per transaction under it
    assert table_dir.is_dir() and not any(table_dir.iterdir())  # the transaction's removed after the commit
