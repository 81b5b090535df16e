"""What a channel's target schema makes of each DDL: a step, or nothing, and the columns the next rows map to."""

from __future__ import annotations

import pytest
import structlog

from canalbridge.sync.errors import SchemaChangeError
from canalbridge.sync.model.changes import BeforeImages
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.tables import TableId
from canalbridge.sync.schema.ddl import AddColumn, RenameTable, TableName, TruncateTable
from canalbridge.sync.schema.target import TargetSchema
from canalbridge.sync.settings import ChannelSettings, SchemaSettings

AT = EntryPosition("mysql-bin.000001", 400, 0)
ORDERS = TableId("db", "orders")


def schema_of(channel: ChannelSettings, columns: tuple[str, ...] | None = ("id", "name"),
              **settings: str) -> TargetSchema:
    target = TargetSchema(channel, SchemaSettings(**settings), BeforeImages.KEY_CHANGES, structlog.get_logger())
    target.reset(columns, {})
    return target


def test_a_column_added_becomes_a_step_and_the_next_rows_map_onto_the_new_columns():
    target = schema_of(ChannelSettings("db.orders", "lake.o"))
    alteration = target.ddl("ALTER TABLE orders ADD COLUMN qty INT", AT, ORDERS)
    assert alteration is not None and alteration.position == AT
    assert [type(change) for change in alteration.changes] == [AddColumn]
    assert target.mapper(("db", "orders_2")).target_columns == ("id", "name", "qty")


def test_a_ddl_that_changes_no_column_makes_no_step():
    target = schema_of(ChannelSettings("db.orders", "lake.o"))
    assert target.ddl("CREATE INDEX by_name ON orders (name)", AT, ORDERS) is None
    assert target.mapper(ORDERS).target_columns == ("id", "name")


def test_a_truncate_is_applied_only_when_the_job_says_so_and_never_to_a_merged_target():
    assert schema_of(ChannelSettings("db.orders", "lake.o")).ddl("TRUNCATE TABLE orders", AT, ORDERS) is None
    applied = schema_of(ChannelSettings("db.orders", "lake.o"), truncate="apply").ddl("TRUNCATE orders", AT, ORDERS)
    assert applied is not None and [type(change) for change in applied.changes] == [TruncateTable]
    merged = ChannelSettings("db.orders_*", "lake.o", rule="db.orders_*", merged=True)
    assert schema_of(merged, truncate="apply").ddl("TRUNCATE orders_1", AT, ("db", "orders_1")) is None


def test_a_followed_rename_names_the_new_table_in_the_sessions_schema():
    assert schema_of(ChannelSettings("db.orders", "lake.o")).ddl("RENAME TABLE orders TO v2", AT, ORDERS) is None
    followed = schema_of(ChannelSettings("db.orders", "lake.o"), rename_table="follow")
    alteration = followed.ddl("RENAME TABLE orders TO v2", AT, ORDERS)
    assert alteration is not None and alteration.changes == (RenameTable(TableName("db", "v2")),)


def test_column_changes_are_not_applied_to_a_channel_with_an_explicit_column_list():
    target = schema_of(ChannelSettings("db.orders", "lake.o", columns=("id", "name")))
    assert target.ddl("ALTER TABLE orders ADD COLUMN qty INT", AT, ORDERS) is None


def test_a_key_change_on_one_shard_of_a_merged_target_without_a_configured_key_is_refused():
    merged = ChannelSettings("db.orders_*", "lake.o", rule="db.orders_*", merged=True)
    with pytest.raises(SchemaChangeError, match="set key for the channel"):
        schema_of(merged).ddl("ALTER TABLE orders_1 DROP PRIMARY KEY, ADD PRIMARY KEY (name)", AT, ("db", "orders_1"))
    keyed = ChannelSettings("db.orders_*", "lake.o", rule="db.orders_*", merged=True, key=("id",))
    assert schema_of(keyed).ddl("ALTER TABLE orders_1 DROP PRIMARY KEY, ADD PRIMARY KEY (name)", AT,
                                ("db", "orders_1")) is None  # (the channel keeps its own key)


def test_a_column_one_shard_renamed_takes_the_other_shards_rows_under_its_old_name():
    merged = ChannelSettings("db.orders_*", "lake.o", rule="db.orders_*", merged=True)
    target = schema_of(merged)
    other = target.mapper(("db", "orders_2"))
    assert target.ddl("ALTER TABLE orders_1 RENAME COLUMN name TO label", AT, ("db", "orders_1")) is not None
    assert other.target_columns == ("id", "label")
    assert target.mapper(("db", "orders_3")).target_columns == ("id", "label")


def test_a_reset_forgets_what_dropped_entries_taught():
    target = schema_of(ChannelSettings("db.orders", "lake.o"))
    target.ddl("ALTER TABLE orders ADD COLUMN qty INT", AT, ORDERS)
    target.reset(("id", "name"), {})
    assert target.mapper(ORDERS).target_columns == ("id", "name")
