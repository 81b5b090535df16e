"""The JVM RowChange decoder gives, change for change, what RowMapper gives in Python."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.devkit.catalog import ALL_TYPES_COLUMNS
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef, row_run
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.mysql_types import canonical
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import ColumnsChangedError, EntryDecodeError
from canalbridge.sync.model.changes import BeforeImages
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.settings import ChannelSettings
from spark_sink.decode import CHANGE_BITS, RAW_FIELDS, decode_failure, decoded_changes, register
from spark_sink.sink import make_writer

ALL_TYPES = TableDef("src", "all_types", ALL_TYPES_COLUMNS)
TWO_KEYS = TableDef("src", "two_keys", (ColumnDef.of("tenant", "int(11)", True), ColumnDef.of("id", "bigint(20)", True),
                                        ColumnDef.of("name", "varchar(32)")))
ROWDATA = entry_pb.EntryType.ROWDATA


def _workload_entries(table: TableDef, changes: int) -> list[entry_pb.Entry]:
    spec = WorkloadSpec(tables=(table,), row_changes=changes, pk_change_ratio=0.3, null_ratio=0.2,
                        ddl_every=3, seed=7)
    return [e for e in Workload(spec) if e.entryType == ROWDATA]


def _raw_frame(spark, entries: list[entry_pb.Entry]):
    schema = ", ".join(f"{name} {kind}" for name, kind in RAW_FIELDS)
    rows = [(order, e.header.logfileName, e.header.logfileOffset, e.header.executeTime, e.storeValue)
            for order, e in enumerate(entries)]
    return spark.createDataFrame(rows, schema=schema)


def _python_changes(table: TableDef, entries: list[entry_pb.Entry], before: BeforeImages):
    mapper = RowMapper(table.qualified, None, before_images=before)
    changes = []
    for entry in entries:
        position = EntryPosition.of(entry)
        for row in mapper.map(entry_pb.RowChange.FromString(entry.storeValue), position):
            changes.append((row.kind.value, position.journal, position.offset, list(row.values)))
    return mapper, changes


@pytest.mark.parametrize("before", [BeforeImages.FULL, BeforeImages.KEY_CHANGES], ids=["changelog", "upsert"])
@pytest.mark.parametrize("table", [ALL_TYPES, TWO_KEYS], ids=["all_types", "two_keys"])
def test_every_change_decodes_as_in_python(spark, table, before):
    entries = _workload_entries(table, 600)
    assert any(entry_pb.RowChange.FromString(e.storeValue).isDdl for e in entries), "the workload has DDLs"
    mapper, expected = _python_changes(table, entries, before)
    assert any(kind == "-U" for kind, *_ in expected), "the workload changes keys"
    register(spark)
    keys = mapper.key_indexes if before is BeforeImages.KEY_CHANGES else None
    frame = decoded_changes(_raw_frame(spark, entries), mapper.columns, keys)
    width = len(mapper.columns)
    got = [(r["_kind"], r["_journal"], r["_offset"], [r[f"c{i}"] for i in range(width)])
           for r in frame.orderBy("_seq").collect()]
    assert got == expected
    seqs = [r["_seq"] for r in frame.collect()]
    assert len(set(seqs)) == len(seqs) and all(s >> CHANGE_BITS < len(entries) for s in seqs)


def _failure_decoding(spark, fits: entry_pb.Entry, second: entry_pb.Entry):
    """Decode a TWO_KEYS entry that fits, then ``second``: the sync core's error for the failure, and Spark's text."""
    mapper, _ = _python_changes(TWO_KEYS, [fits], BeforeImages.FULL)
    register(spark)
    frame = decoded_changes(_raw_frame(spark, [fits, second]), mapper.columns, None)
    with pytest.raises(Exception) as failure:
        frame.collect()
    return decode_failure(failure.value, TWO_KEYS.qualified), str(failure.value)


def test_a_row_change_with_other_columns_fails_the_query_and_names_its_position(spark):
    writer = BinlogWriter()
    fits = writer.rows(TWO_KEYS, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 1, "name": "a"})])
    wider = TableDef("src", "two_keys", (*TWO_KEYS.columns, ColumnDef.of("added", "int(11)")))
    altered = writer.rows(wider, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 2, "name": "b", "added": 5})])
    changed, message = _failure_decoding(spark, fits, altered)
    assert isinstance(changed, ColumnsChangedError), message
    assert changed.position.same_place(EntryPosition.of(altered)) and changed.count == 4
    assert changed.columns == "tenant int key, id bigint key, name varchar(32), added int"


def test_key_flags_are_part_of_the_shape_unless_the_channel_has_its_own_key(spark):
    writer = BinlogWriter()
    fits = writer.rows(TWO_KEYS, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 1, "name": "a"})])
    rekeyed = TableDef("src", "two_keys", (ColumnDef.of("tenant", "int(11)"), *TWO_KEYS.columns[1:]))
    moved = writer.rows(rekeyed, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 2, "name": "b"})])
    changed, message = _failure_decoding(spark, fits, moved)  # keyed by the source's flags: a changed key
    assert isinstance(changed, ColumnsChangedError), message
    assert changed.columns == "tenant int, id bigint key, name varchar(32)"
    mapper, _ = _python_changes(TWO_KEYS, [fits], BeforeImages.FULL)
    frame = decoded_changes(_raw_frame(spark, [fits, moved]), mapper.columns, None, source_key=False)
    assert frame.count() == 2  # a channel with its own key: the same shape


def test_the_jvm_spells_a_type_as_python_does(spark):
    from tests.unit.test_mysql_types import SPELLINGS

    register(spark)
    jvm = spark.sparkContext._jvm.canalbridge.spark.RowChangeDecoder
    odd = ["geometry", "SET('A', 'b')", "float(0024)", "float(99999999999)", "enum('x\u2028y', 'Ä')",
           "\u00a0int", "varchar(8)\x1f", "datetime(0)", "bit", "year(4)", "CHARACTER VARYING(3)", "\u017fet('a')"]
    spellings = [text for pair in SPELLINGS for text in pair] + odd
    assert [jvm.canonical(text) for text in spellings] == [canonical(text) for text in spellings]


def test_a_row_change_whose_types_are_spelled_another_way_decodes(spark):
    writer = BinlogWriter()
    fits = writer.rows(TWO_KEYS, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 1, "name": "a"})])
    spelled = TableDef("src", "two_keys", (ColumnDef.of("tenant", "INT", True), ColumnDef.of("id", "BIGINT", True),
                                           ColumnDef.of("name", "VARCHAR(32)")))
    other = writer.rows(spelled, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 2, "name": "b"})])
    mapper, _ = _python_changes(TWO_KEYS, [fits], BeforeImages.FULL)
    register(spark)
    frame = decoded_changes(_raw_frame(spark, [fits, other]), mapper.columns, None)
    assert sorted(r["c1"] for r in frame.collect()) == ["1", "2"]


def test_bytes_that_are_not_a_row_change_fail_the_query_and_name_their_position(spark):
    binlog = BinlogWriter()
    fits = binlog.rows(TWO_KEYS, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 1, "name": "a"})])
    garbled = binlog.rows(TWO_KEYS, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 2, "name": "b"})])
    garbled.storeValue = b"\xff\xff\xff"
    undecodable, message = _failure_decoding(spark, fits, garbled)
    assert isinstance(undecodable, EntryDecodeError), message
    assert undecodable.position.same_place(EntryPosition.of(garbled))
    assert "storeValue is not a RowChange" in str(undecodable) and TWO_KEYS.qualified in str(undecodable)


NARROWER = TableDef("src", "two_keys", TWO_KEYS.columns[:2])  # name dropped
KEY_RETYPED = TableDef("src", "two_keys", (ColumnDef.of("tenant", "varchar(8)", True), *TWO_KEYS.columns[1:]))


@pytest.mark.parametrize("mode", ["changelog", "upsert", "equality"])  # (equality: upsert_deletes = "equality")
@pytest.mark.parametrize("altered_table, values", [
    (NARROWER, {"tenant": 1, "id": 2}),
    (KEY_RETYPED, {"tenant": "x", "id": 2, "name": "b"}),
], ids=["column_dropped", "key_retyped"])
def test_a_writer_fails_a_row_change_of_other_columns_as_such(spark, spark_settings, mode, altered_table, values):
    # A value past the end of the row or a shifted column's cast must not fail first, in
    # any statement of the commit (the upsert's DELETE reads only the keys).
    binlog = BinlogWriter()
    fits = binlog.rows(TWO_KEYS, entry_pb.EventType.INSERT, [(None, {"tenant": 1, "id": 1, "name": "a"})])
    altered = binlog.rows(altered_table, entry_pb.EventType.INSERT, [(None, values)])
    target = f"lake.decoder.other_columns_{mode}_{len(values)}"
    settings = dataclasses.replace(spark_settings, upsert_deletes="equality" if mode == "equality" else "position")
    channel = ChannelSettings(TWO_KEYS.qualified, target, mode="changelog" if mode == "changelog" else "upsert")
    writer = make_writer(spark, channel, "decoder", settings)
    assert writer.decodes_row_changes()
    mapper = RowMapper(TWO_KEYS.qualified, None, before_images=writer.before_images())
    mapper.map(entry_pb.RowChange.FromString(fits.storeValue), EntryPosition.of(fits))
    writer.begin()
    writer.send_raw(mapper.raw_batch(row_run([fits, altered])))
    with pytest.raises(ColumnsChangedError) as failure:
        writer.commit(EntryPosition.of(altered), "t1")
    assert failure.value.position.same_place(EntryPosition.of(altered))
    assert getattr(writer.mode, "equality_deletes", False) is (mode == "equality")  # (the path that failed)
