"""Source tables the workload generator writes to: every MySQL type Canal renders."""

from __future__ import annotations

from canalbridge.devkit.entries import ColumnDef, TableDef

_C = ColumnDef.of

ALL_TYPES_COLUMNS = (
    _C("id", "int(11)", is_key=True),
    _C("c_tinyint", "tinyint(4)"),
    _C("c_tinyint_u", "tinyint(3) unsigned"),
    _C("c_smallint", "smallint(6)"),
    _C("c_mediumint_u", "mediumint(8) unsigned"),
    _C("c_int", "int(11)"),
    _C("c_int_u", "int(10) unsigned"),
    _C("c_bigint", "bigint(20)"),
    _C("c_bigint_u", "bigint(20) unsigned"),
    _C("c_decimal", "decimal(12,2)"),
    _C("c_decimal_wide", "decimal(30,10)"),
    _C("c_float", "float"),
    _C("c_double", "double"),
    _C("c_char", "char(8)"),
    _C("c_varchar", "varchar(64)"),
    _C("c_text", "text"),
    _C("c_enum", "enum('red','green','blue')"),
    _C("c_set", "set('a','b','c','d')"),
    _C("c_json", "json"),
    _C("c_binary", "binary(4)"),
    _C("c_varbinary", "varbinary(16)"),
    _C("c_blob", "blob"),
    _C("c_bit", "bit(12)"),
    _C("c_year", "year(4)"),
    _C("c_date", "date"),
    _C("c_time", "time(3)"),
    _C("c_datetime", "datetime(6)"),
    _C("c_datetime0", "datetime"),
    _C("c_timestamp", "timestamp(3)"),
)

ORDERS_COLUMNS = (
    _C("id", "bigint(20)", is_key=True),
    _C("customer", "varchar(64)"),
    _C("amount", "decimal(12,2)"),
    _C("status", "enum('new','paid','shipped','cancelled')"),
    _C("created_at", "datetime(3)"),
    _C("note", "text"),
)

ACCOUNTS_COLUMNS = (
    _C("tenant", "int(11)", is_key=True),
    _C("id", "bigint(20) unsigned", is_key=True),
    _C("name", "varchar(32)"),
    _C("balance", "decimal(20,4)"),
    _C("flags", "set('vip','frozen','audited')"),
    _C("updated_at", "timestamp(6)"),
    _C("avatar", "blob"),
)

_TEMPLATES = (("all_types", ALL_TYPES_COLUMNS), ("orders", ORDERS_COLUMNS), ("accounts", ACCOUNTS_COLUMNS))


def standard_tables(count: int = 3, schema: str = "shop") -> tuple[TableDef, ...]:
    """``count`` tables cycling through the templates: all_types, orders, accounts, orders_1, ..."""
    tables = []
    for index in range(count):
        name, columns = _TEMPLATES[index % len(_TEMPLATES)]
        round_number = index // len(_TEMPLATES)
        if round_number:
            name = f"{name}_{round_number}"
        tables.append(TableDef(schema, name, columns, table_id=100 + index))
    return tuple(tables)


def narrow_table(name: str = "events", schema: str = "bench", columns: int = 10) -> TableDef:
    """A table of ``columns`` simple columns (bigint key, ints, varchars, decimal, datetime)."""
    defs = [_C("id", "bigint(20)", is_key=True)]
    kinds = ("int(11)", "varchar(32)", "decimal(12,2)", "datetime(3)", "bigint(20)")
    for index in range(1, columns):
        defs.append(_C(f"c{index}", kinds[(index - 1) % len(kinds)]))
    return TableDef(schema, name, tuple(defs), table_id=1)
