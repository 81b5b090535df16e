"""How a DDL's column changes become Iceberg schema operations (spark_sink.evolve), without Spark."""

from __future__ import annotations

import pytest

from canalbridge.sync.schema.ddl import Place, parse_ddl
from spark_sink.errors import EvolutionRefused
from spark_sink.evolve import Add, Column, Drop, MakeNullable, Move, Rename, Widen, plan

TARGET = (Column("id", "int", nullable=False), Column("name", "string"), Column("qty", "int", nullable=False),
          Column("price", "decimal(10,2)"), Column("ratio", "float"))


def planned(sql: str, *, drop: bool = False) -> list:
    return plan(TARGET, parse_ddl(sql).changes_for("db", "t"), drop_columns=drop, key=("id",))


def test_added_columns_are_nullable_at_their_place():
    assert planned("ALTER TABLE t ADD c BIGINT AFTER name, ADD d VARCHAR(3) FIRST") == [
        Add("c", "bigint", Place(after="name")), Add("d", "string", Place(first=True))]


def test_a_column_the_target_kept_is_not_reused_by_an_add_of_its_name():
    # Its rows from before the source dropped it would read their old values, not NULL.
    with pytest.raises(EvolutionRefused, match="the target has a column name already"):
        planned("ALTER TABLE t ADD NAME VARCHAR(40)")
    assert planned("ALTER TABLE t DROP name, ADD name BIGINT", drop=True) == [Drop("name"), Add("name", "bigint",
                                                                                                Place())]


def test_a_type_canal_reads_but_iceberg_cannot_store_is_refused():
    with pytest.raises(EvolutionRefused, match="no Spark type"):
        planned("ALTER TABLE t ADD c UUID")


def test_a_dropped_column_is_kept_nullable_or_dropped_and_a_key_never():
    assert planned("ALTER TABLE t DROP qty") == [MakeNullable("qty")]
    assert planned("ALTER TABLE t DROP name") == []
    assert planned("ALTER TABLE t DROP name", drop=True) == [Drop("name")]
    with pytest.raises(EvolutionRefused, match="column id is part of the key"):
        planned("ALTER TABLE t DROP id", drop=True)


def test_renames_keep_the_data_and_a_change_may_also_widen_and_move():
    assert planned("ALTER TABLE t RENAME COLUMN name TO label") == [Rename("name", "label")]
    assert planned("ALTER TABLE t CHANGE qty amount BIGINT FIRST") == [
        Rename("qty", "amount"), Widen("amount", "bigint"), Move("amount", Place(first=True))]
    assert planned("ALTER TABLE t CHANGE name NAME VARCHAR(80)") == []  # names are case-blind; still a string
    with pytest.raises(EvolutionRefused, match="has a column name already"):
        planned("ALTER TABLE t RENAME COLUMN qty TO name")


@pytest.mark.parametrize(("sql", "expected"), [
    ("ALTER TABLE t MODIFY qty BIGINT", [Widen("qty", "bigint")]),
    ("ALTER TABLE t MODIFY ratio DOUBLE", [Widen("ratio", "double")]),
    ("ALTER TABLE t MODIFY price DECIMAL(14,2)", [Widen("price", "decimal(14,2)")]),
    ("ALTER TABLE t MODIFY qty SMALLINT", []),  # MySQL narrows, but it is an int in Iceberg either way
])
def test_types_widen_where_iceberg_allows(sql, expected):
    assert planned(sql) == expected


@pytest.mark.parametrize(("sql", "says"), [
    ("ALTER TABLE t MODIFY qty VARCHAR(10)", "column qty is int in the target and would become string"),
    ("ALTER TABLE t MODIFY price DECIMAL(12,4)", "decimal(10,2) in the target and would become decimal(12,4)"),
    ("ALTER TABLE t MODIFY price DECIMAL(8,2)", "would become decimal(8,2)"),
    ("ALTER TABLE t MODIFY ratio INT", "float in the target and would become int"),
    ("ALTER TABLE t CHANGE missing other INT", "the target has no column missing"),
])
def test_other_type_changes_are_refused_naming_the_column_and_both_types(sql, says):
    with pytest.raises(EvolutionRefused, match=says.replace("(", r"\(").replace(")", r"\)")):
        planned(sql)


def shared(sql: str) -> list:
    return plan(TARGET, parse_ddl(sql).changes_for("db", "t"), drop_columns=False, key=("id",), shared=True)


def test_a_shared_target_applies_each_shards_copy_of_a_ddl_once():
    # The first shard's ALTER added, renamed or widened; the next shard's finds it done.
    assert shared("ALTER TABLE t ADD name VARCHAR(40)") == []
    assert shared("ALTER TABLE t ADD qty BIGINT") == [Widen("qty", "bigint")]
    assert shared("ALTER TABLE t ADD new_col INT AFTER id") == [Add("new_col", "int", Place(after="id"))]
    assert shared("ALTER TABLE t CHANGE old_name name VARCHAR(40)") == []
    assert shared("ALTER TABLE t MODIFY price DECIMAL(8,2)") == []  # the target holds the wider type
    assert shared("ALTER TABLE t MODIFY qty BIGINT FIRST") == [Widen("qty", "bigint")]  # shards' orders differ


def test_a_shared_target_refuses_a_shards_type_that_neither_widens_nor_fits():
    with pytest.raises(EvolutionRefused, match="another shard's DDL"):
        shared("ALTER TABLE t ADD name INT")
