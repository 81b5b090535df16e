"""Row changes map onto target rows as the design says."""

from __future__ import annotations

import pytest

from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db.chunks import KeyRange
from canalbridge.sync.errors import RowMappingError
from canalbridge.sync.model.changes import BeforeImages, ChangeKind, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.snapshot.chunk_window import SnapshotChunk
from canalbridge.sync.snapshot.progress import TableProgress

EventType = entry_pb.EventType
TABLE = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(8)")))
POSITION = EntryPosition("mysql-bin.000003", 120)


def change(event_type, images, table=TABLE):
    entry = BinlogWriter().rows(table, event_type, images)
    return entry_pb.RowChange.FromString(entry.storeValue)


def test_insert_gives_the_after_image():
    rows = RowMapper("db.t", None).map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    assert [(r.kind, r.values) for r in rows] == [(ChangeKind.INSERT, ("1", "a"))]


def test_delete_gives_the_before_image():
    rows = RowMapper("db.t", None).map(change(EventType.DELETE, [({"id": 1, "name": "a"}, None)]), POSITION)
    assert [(r.kind, r.values) for r in rows] == [(ChangeKind.DELETE, ("1", "a"))]


def test_update_gives_before_then_after_image():
    images = [({"id": 1, "name": "a"}, {"id": 1, "name": "b"})]
    rows = RowMapper("db.t", None).map(change(EventType.UPDATE, images), POSITION)
    assert [(r.kind, r.values) for r in rows] == [
        (ChangeKind.UPDATE_BEFORE, ("1", "a")), (ChangeKind.UPDATE_AFTER, ("1", "b"))]


def test_update_changing_the_key_removes_the_old_key_first():
    images = [({"id": 1, "name": "a"}, {"id": 2, "name": "a"})]
    rows = RowMapper("db.t", None).map(change(EventType.UPDATE, images), POSITION)
    assert [(r.kind, r.kind.removes, r.values) for r in rows] == [
        (ChangeKind.UPDATE_BEFORE, True, ("1", "a")), (ChangeKind.UPDATE_AFTER, False, ("2", "a"))]


def test_null_stays_none():
    rows = RowMapper("db.t", None).map(change(EventType.INSERT, [(None, {"id": 1, "name": None})]), POSITION)
    assert rows[0].values == ("1", None)


def test_explicit_mapping_renames_by_position():
    mapper = RowMapper("db.t", ("user_id", "user_name"))
    mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    assert mapper.output_columns() == ("user_id", "user_name")


def test_column_count_mismatch_names_table_counts_and_position():
    mapper = RowMapper("db.t", ("only_one",))
    with pytest.raises(RowMappingError) as failure:
        mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    message = str(failure.value)
    assert "table db.t" in message and "row has 2 columns but the target has 1" in message
    assert "mysql-bin.000003:120" in message
    assert not failure.value.transient


def test_table_without_primary_key_needs_a_key_setting():
    keyless = TableDef("db", "k", (ColumnDef.of("a", "int(11)"), ColumnDef.of("b", "int(11)")))
    entry = change(EventType.INSERT, [(None, {"a": 1, "b": 2})], keyless)
    with pytest.raises(RowMappingError, match="no primary key"):
        RowMapper("db.k", None).map(entry, POSITION)
    mapper = RowMapper("db.k", None, key_columns=("b",))
    mapper.map(entry, POSITION)
    assert mapper.key_indexes == (1,)


def test_ddl_maps_to_nothing():
    ddl = entry_pb.RowChange.FromString(BinlogWriter().ddl("db", "t", EventType.ALTER, "ALTER TABLE t").storeValue)
    assert RowMapper("db.t", None).map(ddl, POSITION) == []


def test_a_writer_wanting_key_changes_gets_only_keys_and_only_changed_keys():
    mapper = RowMapper("db.t", None, before_images=BeforeImages.KEY_CHANGES)
    images = [({"id": 1, "name": "a"}, {"id": 1, "name": "b"}), ({"id": 2, "name": "c"}, {"id": 3, "name": "c"})]
    rows = mapper.map(change(EventType.UPDATE, images), POSITION)
    rows += mapper.map(change(EventType.DELETE, [({"id": 4, "name": "d"}, None)]), POSITION)
    assert [(r.kind, r.values) for r in rows] == [
        (ChangeKind.UPDATE_AFTER, ("1", "b")),
        (ChangeKind.UPDATE_BEFORE, ("2", None)), (ChangeKind.UPDATE_AFTER, ("3", "c")),
        (ChangeKind.DELETE, ("4", None)),
    ]


RENAMED = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("label", "varchar(8)")))


def ddl(sql: str):
    return entry_pb.RowChange.FromString(BinlogWriter().ddl("db", "t", EventType.ALTER, sql).storeValue)


def test_columns_that_change_under_a_running_mapper_pause_naming_the_ddl():
    # Same count, another name: mapping by position would put `label` into `name`.
    mapper = RowMapper("db.t", None)
    mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    later = EntryPosition("mysql-bin.000003", 900)
    assert mapper.map(ddl("ALTER TABLE t CHANGE name label VARCHAR(8)"), EntryPosition("mysql-bin.000003", 500)) == []
    with pytest.raises(RowMappingError) as failure:
        mapper.map(change(EventType.INSERT, [(None, {"id": 2, "label": "b"})], RENAMED), later)
    message = str(failure.value)
    assert "table db.t at binlog position mysql-bin.000003:900" in message
    assert "columns changed from (id int key, name varchar(8)) to (id int key, label varchar(8))" in message
    assert "after the DDL 'ALTER TABLE t CHANGE name label VARCHAR(8)' at mysql-bin.000003:500" in message


def test_a_type_change_pauses_too():
    widened = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(20)")))
    mapper = RowMapper("db.t", None)
    mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    with pytest.raises(RowMappingError, match=r"name varchar\(8\)\) to \(id int key, name varchar\(20\)\)"):
        mapper.map(change(EventType.INSERT, [(None, {"id": 2, "name": "b"})], widened), POSITION)


def test_a_type_spelled_another_way_is_the_same_column():
    # Canal with its schema history on spells a column as its DDL did (INT), and as the live table shows it
    # otherwise (int(11)): rows of both spellings, and a snapshot chunk's, are one shape.
    spelled = TableDef("db", "t", (ColumnDef.of("id", "INT", is_key=True), ColumnDef.of("name", "VARCHAR(8)")))
    mapper = RowMapper("db.t", None)
    mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    rows = mapper.map(change(EventType.INSERT, [(None, {"id": 2, "name": "b"})], spelled), POSITION)
    assert [row.values for row in rows] == [("2", "b")]


def test_without_a_columns_list_the_row_names_must_be_the_targets():
    mapper = RowMapper("db.t", ("id", "name"), by_name=True)
    assert mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    fresh = RowMapper("db.t", ("id", "name"), by_name=True)  # a restart after the rename
    with pytest.raises(RowMappingError, match=r"row columns \(id, label\) are not the target's \(id, name\)"):
        fresh.map(change(EventType.INSERT, [(None, {"id": 2, "label": "b"})], RENAMED), POSITION)
    explicit = RowMapper("db.t", ("id", "name"))  # an explicit list maps by position, whatever the names
    assert explicit.map(change(EventType.INSERT, [(None, {"id": 2, "label": "b"})], RENAMED), POSITION)


KEYED_BY_BOTH = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True),
                                      ColumnDef.of("name", "varchar(8)", is_key=True)))


def test_rows_whose_key_flags_changed_pause_a_mapper_keyed_by_the_source():
    mapper = RowMapper("db.t", None)
    mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    with pytest.raises(RowMappingError, match=r"the source's primary key changed: the row's columns are "
                                              r"\(id int key, name varchar\(8\) key\)"):
        mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "b"})], KEYED_BY_BOTH), POSITION)


def test_a_mapper_with_its_own_key_ignores_the_sources_key_flags():
    # A channel's `key` (a table without a primary key, say) stays its key when the source gains one.
    mapper = RowMapper("db.t", None, ["id"])
    mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    rows = mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "b"})], KEYED_BY_BOTH), POSITION)
    assert [row.values for row in rows] == [("1", "b")] and mapper.key_indexes == (0,)


@pytest.mark.parametrize("span", [KeyRange((1,), (9,)), None], ids=["a-chunk-of-no-row", "a-mark"])
def test_a_chunk_that_read_no_row_keeps_its_noted_keys_and_a_mark_has_none(span):
    # (A re-sync's chunk whose range the source emptied still removes stale rows: never the keys it noted.)
    mapper = RowMapper("db.t", None)
    mapper.map(change(EventType.INSERT, [(None, {"id": 1, "name": "a"})]), POSITION)
    columns = (SourceColumn("id", "int(11)", 4, True), SourceColumn("name", "varchar(8)", 12, False))
    chunk = SnapshotChunk(columns, object(), 0, TableProgress("s", "db.t", (9,), (9,), ("id",)), span)
    batch = mapper.chunk_batch(chunk, ["id"], [("4",)], POSITION)
    assert batch.dropped == (frozenset({("4",)}) if span is not None else frozenset())
    assert batch.span == span
