"""A DDL's column changes applied to Iceberg targets: one commit with the position, the data kept."""

from __future__ import annotations

import json

import pytest

from canalbridge.sync.errors import SchemaChangeError
from canalbridge.sync.model.changes import Alteration, ChangeKind, ChangeRow, RowBatch, SourceColumn
from canalbridge.sync.schema.ddl import parse_ddl
from canalbridge.sync.settings import ChannelSettings
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from spark_sink.table import TargetTable
from tests.integration.spark.test_position_readback import JOB, position

ID = SourceColumn("id", "int(11)", 4, True)
NAME = SourceColumn("name", "varchar(32)", 12, False)


def commit(sink, end, columns: tuple[SourceColumn, ...], *rows: tuple, key: tuple[int, ...] = (0,)) -> None:
    names = tuple(c.name for c in columns)
    changes = tuple(ChangeRow(ChangeKind.INSERT, tuple(None if v is None else str(v) for v in row), end)
                    for row in rows)
    sink.writer.begin()
    sink.writer.send(RowBatch("db.t", names, columns, key, changes))
    sink.writer.commit(end, f"l{end.offset}")


def alter(sink, sql: str, at, *, drop: bool = False) -> None:
    sink.schema.alter(Alteration("db.t", sql, parse_ddl(sql).changes_for("db", "t"), at, drop), at,
                 f"ddl at {at}")


def table(spark, target: str) -> tuple[list[str], list[tuple]]:
    frame = spark.table(quote_table(target))
    return frame.columns, [tuple(row) for row in frame.orderBy(frame.columns[0]).collect()]


def types(spark, target: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(quote_table(target)).schema.fields}


def test_an_added_column_lands_at_its_place_older_rows_read_null_and_the_position_moves(spark, spark_settings):
    target = "lake.evolve_add.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"))
    alter(sink, "ALTER TABLE t ADD COLUMN qty INT AFTER id", position(150))
    assert sink.state.read_state().position == position(150)  # the DDL's snapshot carries its position
    commit(sink, position(200), (ID, SourceColumn("qty", "int(11)", 4, False), NAME), (2, 5, "b"), (1, 7, "A"))
    assert table(spark, target) == (["id", "qty", "name"], [(1, 7, "A"), (2, 5, "b")])
    commit(sink, position(300), (ID, SourceColumn("qty", "int(11)", 4, False), NAME), (3, None, "c"))
    assert sink.state.read_state().position == position(300)


def test_renames_and_widening_keep_the_data(spark, spark_settings):
    target = "lake.evolve_rename.t"
    qty = SourceColumn("qty", "int(11)", 4, False)
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME, qty), (1, "a", 10))
    alter(sink, "ALTER TABLE t CHANGE name label VARCHAR(64), MODIFY qty BIGINT", position(150))
    assert types(spark, target) == {"id": "int", "label": "string", "qty": "bigint"}
    label, wide = SourceColumn("label", "varchar(64)", 12, False), SourceColumn("qty", "bigint(20)", -5, False)
    commit(sink, position(200), (ID, label, wide), (2, "b", 1 << 40))
    assert table(spark, target) == (["id", "label", "qty"], [(1, "a", 10), (2, "b", 1 << 40)])


@pytest.mark.parametrize("drop", [False, True], ids=["kept", "dropped"])
def test_a_dropped_column_stays_null_for_new_changelog_rows_unless_the_job_drops_it(spark, spark_settings, drop):
    target = f"lake.evolve_drop_{'dropped' if drop else 'kept'}.t"
    sink = make_sink(spark, ChannelSettings("db.t", target, mode="changelog"), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"))
    alter(sink, "ALTER TABLE t DROP COLUMN name", position(150), drop=drop)
    commit(sink, position(200), (ID,), (2,))
    rows = [tuple(row) for row in spark.sql(f"SELECT * FROM {quote_table(target)} ORDER BY id").collect()]
    if drop:
        assert [row[:1] for row in rows] == [(1,), (2,)] and "name" not in types(spark, target)
    else:
        assert [row[:2] for row in rows] == [(1, "a"), (2, None)]
    assert sink.state.read_state().position == position(200)


def test_a_change_iceberg_cannot_follow_is_refused_naming_table_ddl_and_position(spark, spark_settings):
    target = "lake.evolve_refused.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"))
    with pytest.raises(SchemaChangeError) as refused:
        alter(sink, "ALTER TABLE t MODIFY id VARCHAR(10)", position(150))
    message = str(refused.value)
    assert "table db.t: cannot apply the DDL 'ALTER TABLE t MODIFY id VARCHAR(10)' at mysql-bin.000007:150" in message
    assert "column id is int in the target and would become string" in message
    assert types(spark, target) == {"id": "int", "name": "string"}
    assert sink.state.read_state().position == position(100)  # nothing past the refused DDL


def test_a_renamed_key_column_stays_the_key(spark, spark_settings):
    target = "lake.evolve_key.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"), (2, "b"))
    alter(sink, "ALTER TABLE t RENAME COLUMN id TO pk", position(150))
    pk = SourceColumn("pk", "int(11)", 4, True)
    commit(sink, position(200), (pk, NAME), (2, "B"))  # an upsert by the renamed key replaces the row
    assert table(spark, target) == (["pk", "name"], [(1, "a"), (2, "B")])
    assert '"pk"' in TargetTable(spark, target).properties()["canalbridge.primary-key"]


def identifier_fields(spark, target: str) -> list[str]:
    table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, target)
    return sorted(str(name) for name in table.schema().identifierFieldNames())


def test_a_primary_key_change_is_recorded_with_its_position_and_later_upserts_use_the_new_key(spark, spark_settings):
    # Issue 33, hole 2: (1, 'b') must not replace (1, 'a') once the key is (id, name).
    target = "lake.evolve_key_change.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"))
    assert identifier_fields(spark, target) == ["id"]
    alter(sink, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, name)", position(150))
    assert sink.state.read_state().position == position(150)  # the key change's snapshot carries its position
    assert json.loads(TargetTable(spark, target).properties()["canalbridge.primary-key"]) == ["id", "name"]
    # `name` is optional in Iceberg and cannot become required: the table has no identifier fields now.
    assert identifier_fields(spark, target) == []
    keyed = (ID, SourceColumn("name", "varchar(32)", 12, True))
    commit(sink, position(200), keyed, (1, "b"), (1, "a"), key=(0, 1))
    assert table(spark, target) == (["id", "name"], [(1, "a"), (1, "b")])


def test_a_key_narrowed_to_columns_already_required_keeps_them_as_identifier_fields(spark, spark_settings):
    # The DDL spells the column otherwise than the table: Iceberg looks identifier fields up as given.
    target = "lake.evolve_key_narrow.t"
    tenant = SourceColumn("tenant", "int(11)", 4, True)
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (tenant, ID, NAME), (1, 1, "a"), (2, 1, "b"), key=(0, 1))
    assert identifier_fields(spark, target) == ["id", "tenant"]
    alter(sink, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (TENANT)", position(150))
    assert identifier_fields(spark, target) == ["tenant"]
    assert json.loads(TargetTable(spark, target).properties()["canalbridge.primary-key"]) == ["TENANT"]


def test_a_key_replaced_with_its_old_column_dropped_in_one_statement(spark, spark_settings):
    target = "lake.evolve_key_replaced.t"
    code = SourceColumn("code", "varchar(32)", 12, False)
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, code), (1, "x"))
    alter(sink, "ALTER TABLE t DROP PRIMARY KEY, DROP COLUMN id, ADD PRIMARY KEY (code)", position(150), drop=True)
    assert sink.state.read_state().position == position(150)
    assert table(spark, target) == (["code"], [("x",)])
    assert json.loads(TargetTable(spark, target).properties()["canalbridge.primary-key"]) == ["code"]
    assert identifier_fields(spark, target) == []  # code is optional in Iceberg


def test_a_column_added_narrower_than_its_rows_is_widened_before_they_land(spark, spark_settings):
    # MySQL's REAL is a DOUBLE; sqlglot reads the DDL's REAL as a FLOAT. The rows say double.
    target = "lake.evolve_real.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"))
    alter(sink, "ALTER TABLE t ADD ratio REAL", position(150))
    assert types(spark, target)["ratio"] == "float"
    commit(sink, position(200), (ID, NAME, SourceColumn("ratio", "double", 8, False)), (2, "b", "0.1"))
    assert types(spark, target)["ratio"] == "double"
    assert table(spark, target)[1] == [(1, "a", None), (2, "b", 0.1)]


def test_adding_a_column_the_target_kept_after_a_drop_is_refused(spark, spark_settings):
    target = "lake.evolve_readd.t"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"))
    alter(sink, "ALTER TABLE t DROP name", position(150))
    with pytest.raises(SchemaChangeError, match="the target has a column name already"):
        alter(sink, "ALTER TABLE t ADD name VARCHAR(8)", position(160))
    assert sink.state.read_state().position == position(150)


@pytest.mark.parametrize("mode", ["upsert", "changelog"])
def test_a_truncate_the_job_applies_empties_an_upsert_target_and_leaves_a_changelog(spark, spark_settings, mode):
    target = f"lake.evolve_truncate_{mode}.t"
    sink = make_sink(spark, ChannelSettings("db.t", target, mode=mode), JOB, spark_settings)
    commit(sink, position(100), (ID, NAME), (1, "a"), (2, "b"))
    alter(sink, "TRUNCATE TABLE t", position(150))
    commit(sink, position(200), (ID, NAME), (3, "c"))
    ids = [row[0] for row in spark.sql(f"SELECT id FROM {quote_table(target)} ORDER BY id").collect()]
    assert ids == ([3] if mode == "upsert" else [1, 2, 3])
    assert sink.state.read_state().position == position(200)
    if mode == "upsert":  # the TRUNCATE's own snapshot carries its position
        summaries = spark.sql(f"SELECT summary FROM {quote_table(target)}.snapshots WHERE operation = 'delete'")
        assert [row["summary"]["canalbridge.offset"] for row in summaries.collect()] == ["150"]
