"""The workload generator: realistic entries whose replay gives exactly the expected tables."""

from __future__ import annotations

import itertools

import pytest

from canalbridge.devkit.catalog import ALL_TYPES_COLUMNS, standard_tables
from canalbridge.devkit.entries import BinlogWriter
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from tests.infra.replay import apply_entries

EntryType = entry_pb.EntryType
EventType = entry_pb.EventType


def generate(**spec):
    workload = Workload(WorkloadSpec(**spec), BinlogWriter(max_file_bytes=20_000, clock=lambda: 1_700_000_000.9))
    return workload, list(workload)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replaying_entries_gives_the_expected_tables(seed):
    workload, entries = generate(row_changes=1500, seed=seed, ddl_every=5, pk_change_ratio=0.3)
    tables: dict = {}
    assert apply_entries(tables, entries) == 1500
    assert set(tables) == set(workload.expected)
    for name, expected in workload.expected.items():
        assert tables[name] == expected.canal_rows(), name


def test_mix_has_every_operation_and_primary_key_changes():
    workload, _ = generate(row_changes=2000, pk_change_ratio=0.2, ddl_every=10)
    counts = workload.counts
    assert counts["insert"] + counts["update"] + counts["delete"] == 2000
    assert min(counts.values()) > 0
    assert 0.5 < counts["insert"] / 2000 < 0.75


def test_positions_increase_and_files_rotate():
    _, entries = generate(row_changes=800)
    positions = [(e.header.logfileName, e.header.logfileOffset) for e in entries]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert len({name for name, _ in positions}) > 1
    assert positions[0] == ("mysql-bin.000001", 4)


def test_transactions_are_bracketed_and_ddl_stands_alone():
    _, entries = generate(row_changes=600, ddl_every=3)
    open_transaction = False
    for entry in entries:
        if entry.entryType == EntryType.TRANSACTIONBEGIN:
            assert not open_transaction
            open_transaction = True
        elif entry.entryType == EntryType.TRANSACTIONEND:
            assert open_transaction
            open_transaction = False
            assert entry_pb.TransactionEnd.FromString(entry.storeValue).transactionId
        else:
            change = entry_pb.RowChange.FromString(entry.storeValue)
            assert open_transaction != change.isDdl
            if change.isDdl:
                assert change.eventType == EventType.ALTER and change.sql.startswith("ALTER TABLE")
    assert not open_transaction


def test_headers_carry_what_canal_sets():
    _, entries = generate(row_changes=50)
    for entry in entries:
        header = entry.header
        assert header.version == 1 and header.serverenCode == "UTF-8"
        assert header.executeTime == 1_700_000_000_000  # seconds precision, in ms
        assert header.sourceType == entry_pb.Type.MYSQL and header.eventLength > 0
        if entry.entryType == EntryType.ROWDATA:
            change = entry_pb.RowChange.FromString(entry.storeValue)
            props = {p.key: p.value for p in header.props}
            assert props["rowsCount"] == str(len(change.rowDatas))
            assert header.eventType == change.eventType


def test_images_and_updated_flags_follow_canal():
    _, entries = generate(row_changes=1000, null_ratio=0.3)
    seen = set()
    for entry in entries:
        if entry.entryType != EntryType.ROWDATA:
            continue
        change = entry_pb.RowChange.FromString(entry.storeValue)
        for row in change.rowDatas:
            seen.add(change.eventType)
            if change.eventType == EventType.INSERT:
                assert not row.beforeColumns and all(c.updated for c in row.afterColumns)
            elif change.eventType == EventType.DELETE:
                assert not row.afterColumns and not any(c.updated for c in row.beforeColumns)
            else:
                assert not any(c.updated for c in row.beforeColumns)
                for old, new in zip(row.beforeColumns, row.afterColumns):
                    same = (old.isNull and new.isNull) or (
                        not old.isNull and not new.isNull and old.value == new.value
                    )
                    assert new.updated == (not same)
            for column in itertools.chain(row.beforeColumns, row.afterColumns):
                assert column.mysqlType and column.index >= 0
                if column.isNull:
                    assert column.value == ""
    assert seen == {EventType.INSERT, EventType.UPDATE, EventType.DELETE}


def test_all_types_table_covers_every_mysql_type_family():
    bases = {column.mysql_type.base for column in ALL_TYPES_COLUMNS}
    assert bases >= {
        "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "char",
        "varchar", "text", "enum", "set", "json", "binary", "varbinary", "blob", "bit", "year",
        "date", "time", "datetime", "timestamp",
    }
    assert any(column.mysql_type.unsigned for column in ALL_TYPES_COLUMNS)


def test_standard_tables_include_a_composite_key():
    tables = standard_tables(5)
    assert [t.name for t in tables] == ["all_types", "orders", "accounts", "all_types_1", "orders_1"]
    assert tables[2].key_names == ("tenant", "id")


def test_expected_is_refused_before_generation_ends():
    workload = Workload(WorkloadSpec(row_changes=10))
    with pytest.raises(RuntimeError):
        _ = workload.expected
    list(workload)
    with pytest.raises(RuntimeError):
        list(workload)


def test_same_seed_same_entries():
    first = [e.SerializeToString() for e in generate(row_changes=200, seed=9)[1]]
    second = [e.SerializeToString() for e in generate(row_changes=200, seed=9)[1]]
    assert first == second


def test_generated_decimals_stay_within_their_declared_precision():
    from canalbridge.devkit.catalog import ALL_TYPES_COLUMNS
    from canalbridge.devkit.entries import TableDef

    table = TableDef("s", "t", ALL_TYPES_COLUMNS)
    workload = Workload(WorkloadSpec(tables=(table,), row_changes=400, null_ratio=0))
    list(workload)
    wide = [row["c_decimal_wide"] for row in workload.expected["s.t"].rows.values()]
    assert max(v.copy_abs() for v in wide) < 10**20  # decimal(30,10): 20 integer digits (abs() would round)
    assert any(len(v.as_tuple().digits) == 30 for v in wide)  # extremes use every digit
