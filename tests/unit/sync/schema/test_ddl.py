"""DDL text, as Canal forwards it, read into schema changes (canalbridge.sync.schema.ddl)."""

from __future__ import annotations

import logging

import pytest

from canalbridge.mysql_types import MySqlType
from canalbridge.sync.schema.ddl import (
    AddColumn,
    ChangeColumn,
    ColumnDef,
    CreateTable,
    DropColumn,
    DropTable,
    Place,
    RenameColumn,
    RenameTable,
    TableName,
    TruncateTable,
    changes_columns,
    key_after,
    parse_ddl,
)


def changes(sql: str, table: str = "t", schema: str = "shop") -> tuple:
    ddl = parse_ddl(sql)
    assert ddl.understood, ddl.not_understood
    return ddl.changes_for(schema, table)


@pytest.mark.parametrize(("sql", "expected"), [
    ("ALTER TABLE t ADD COLUMN c INT", AddColumn(ColumnDef("c", "int"))),
    ("alter table t add c bigint(20) unsigned not null first",
     AddColumn(ColumnDef("c", "bigint(20) unsigned", not_null=True), Place(first=True))),
    ("ALTER TABLE `t` ADD COLUMN `c` DECIMAL(12,2) DEFAULT 0 COMMENT 'x' AFTER `b`",
     AddColumn(ColumnDef("c", "decimal(12, 2)"), Place(after="b"))),
    ("ALTER TABLE t ADD c ENUM('Red','b, c')", AddColumn(ColumnDef("c", "enum('Red', 'b, c')"))),
    ("ALTER TABLE t ADD c BOOL", AddColumn(ColumnDef("c", "tinyint(1)"))),
    ("ALTER TABLE t DROP COLUMN c", DropColumn("c")),
    ("ALTER TABLE t DROP c", DropColumn("c")),
    ("ALTER TABLE t RENAME COLUMN a TO b", RenameColumn("a", "b")),
    ("ALTER TABLE t CHANGE a b VARCHAR(30) AFTER x",
     ChangeColumn("a", ColumnDef("b", "varchar(30)"), Place(after="x"))),
    ("ALTER TABLE t MODIFY COLUMN a BIGINT", ChangeColumn("a", ColumnDef("a", "bigint"))),
    ("ALTER TABLE t RENAME TO u", RenameTable(TableName(None, "u"))),
    ("TRUNCATE TABLE t", TruncateTable()),
    ("TRUNCATE t", TruncateTable()),
    ("DROP TABLE IF EXISTS t", DropTable()),
], ids=lambda value: value if isinstance(value, str) else "")
def test_one_change(sql, expected):
    assert changes(sql) == (expected,)


def test_every_type_a_ddl_declares_is_one_canal_types_read():
    for declared in ["tinyint(4)", "int unsigned", "bigint(20) unsigned", "decimal(12,2)", "float", "double",
                     "varchar(20)", "char(3)", "text", "mediumtext", "json", "enum('a','b')", "set('x','y')",
                     "binary(16)", "varbinary(8)", "blob", "bit(3)", "year", "date", "datetime(3)",
                     "timestamp(6)", "time"]:
        (change,) = changes(f"ALTER TABLE t ADD c {declared}")
        parsed = MySqlType.parse(change.column.mysql_type)
        assert (parsed.base, parsed.unsigned) == (MySqlType.parse(declared).base, MySqlType.parse(declared).unsigned)


def test_a_change_keeps_its_place_and_says_whether_it_renames():
    (change,) = changes("ALTER TABLE t CHANGE COLUMN note remark VARCHAR(20) FIRST")
    assert change.renames and change.place == Place(first=True)
    (change,) = changes("ALTER TABLE t MODIFY note VARCHAR(40)")
    assert not change.renames and change.column.mysql_type == "varchar(40)"


def test_several_actions_come_in_statement_order_and_others_leave_the_columns():
    assert changes("ALTER TABLE t ADD c2 INT FIRST, ADD INDEX i (c2), DROP c1, ALTER COLUMN c3 SET DEFAULT 1, "
                   "ADD COLUMN c4 TEXT") == (
        AddColumn(ColumnDef("c2", "int"), Place(first=True)), DropColumn("c1"), AddColumn(ColumnDef("c4", "text")))


@pytest.mark.parametrize(("sql", "key"), [
    ("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, b)", ("id", "b")),
    ("ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (b, id)", ("b", "id")),
    ("ALTER TABLE t DROP PRIMARY KEY", ()),
    ("ALTER TABLE t MODIFY b INT NOT NULL PRIMARY KEY", ("b",)),
    ("ALTER TABLE t ADD COLUMN c INT PRIMARY KEY", ("c",)),
    ("ALTER TABLE t RENAME COLUMN id TO ident", ("ident",)),
    ("ALTER TABLE t ADD INDEX i (b), ADD UNIQUE KEY u (b)", ("id",)),
])
def test_a_primary_key_change_is_read_in_statement_order(sql, key):
    # Issue 33, hole 2: these were "no change", and a channel kept keying rows by the old key.
    ddl = parse_ddl(sql)
    assert ddl.understood
    changes = ddl.changes_for("shop", "t")
    assert changes_columns(changes) == (key != ("id",))
    assert key_after(("id",), changes) == key


@pytest.mark.parametrize("sql", [
    "ALTER TABLE t ADD INDEX idx (a)", "ALTER TABLE t COMMENT 'x'", "ALTER TABLE t ENGINE=InnoDB",
    "ALTER TABLE t ADD UNIQUE KEY u (b)", "ALTER TABLE t DROP INDEX i", "ALTER TABLE t ALTER COLUMN c SET DEFAULT 1",
    "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u(id)",
])
def test_a_ddl_that_changes_no_column_is_understood_with_no_changes(sql):
    ddl = parse_ddl(sql)
    assert ddl.understood and ddl.changes_for("shop", "t") == () and ddl.names("shop", "t")


@pytest.mark.parametrize("sql", [
    "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "ALTER ONLINE TABLE t ADD c INT",
    "ALTER TABLE t ADD c INET6", "CREATE INDEX i ON t (a)", "GRANT SELECT ON *.* TO x", "ALTER TABLE t ADD (",
    "CREATE TABLE a (id INT); CREATE TABLE b (id INT)",
])
def test_what_it_cannot_read_says_why_and_logs_nothing(sql, caplog):
    with caplog.at_level(logging.WARNING):
        ddl = parse_ddl(sql)
    assert not ddl.understood and ddl.not_understood and ddl.changes == ()
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")]


def test_names_match_the_sessions_schema_and_ignore_case():
    ddl = parse_ddl("ALTER TABLE Shop.Orders ADD c INT")
    assert ddl.changes_for("shop", "orders") and not ddl.changes_for("other", "orders")
    unqualified = parse_ddl("ALTER TABLE orders ADD c INT")
    assert unqualified.changes_for("any", "ORDERS") and not unqualified.changes_for("any", "orders_2")


def test_create_table_gives_its_columns_and_key():
    ddl = parse_ddl("CREATE TABLE IF NOT EXISTS `shop`.t (id INT NOT NULL AUTO_INCREMENT, a VARCHAR(10) DEFAULT 'x', "
                    "b INT, PRIMARY KEY (id, b), KEY k (a)) ENGINE=InnoDB")
    (create,) = ddl.changes_for("shop", "t")
    assert create == CreateTable((ColumnDef("id", "int", not_null=True), ColumnDef("a", "varchar(10)"),
                                  ColumnDef("b", "int")), ("id", "b"))
    (inline,) = changes("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT)")
    assert inline.key == ("id",)
    (like,) = changes("CREATE TABLE t LIKE u")
    assert like == CreateTable(())


def test_rename_and_drop_name_each_table():
    ddl = parse_ddl("RENAME TABLE shop.a TO shop.a_old, b TO archive.b")
    assert ddl.changes_for("shop", "a") == (RenameTable(TableName("shop", "a_old")),)
    assert ddl.changes_for("shop", "b") == (RenameTable(TableName("archive", "b")),)
    assert ddl.names("shop", "a_old") and ddl.names("archive", "b")
    dropped = parse_ddl("DROP TABLE t1, shop.t2")
    assert dropped.changes_for("shop", "t1") == dropped.changes_for("shop", "t2") == (DropTable(),)
