"""Channel rules: which tables a pattern takes, where each goes, and what Canal is asked to send."""

from __future__ import annotations

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.errors import PatternError, RouteConflictError
from canalbridge.sync.model.changes import BeforeImages
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.tables import TablePattern, TargetTemplate, merges
from canalbridge.sync.routing.rules import Routes
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings


def rule(source: str, target: str, *, regex: bool = False, **options) -> ChannelSettings:
    return ChannelSettings(source, target, pattern=TablePattern(source, regex=regex), **options)


def test_a_glob_takes_the_tables_it_names_case_blind_and_no_others():
    pattern = TablePattern("shop_??.orders_[0-9]*")
    assert pattern.matches("shop_01", "orders_007") and pattern.matches("SHOP_01", "Orders_1")
    assert not pattern.matches("shop_1", "orders_007")  # ? is one character
    assert not pattern.matches("shop_01", "orders_x")
    assert not pattern.matches("shopX01", "orders_1")  # the dot is the schema's end, not any character
    assert TablePattern("shop.*").matches("shop", "a.b") is True  # (a table name with a dot: still shop's)
    assert not TablePattern("shop.*").literal and TablePattern("shop.orders").literal


def test_canal_is_asked_for_exactly_the_tables_the_rules_take():
    job = JobSettings("j", CanalSettings("h", 1, "d"), (
        ChannelSettings("shop.orders", "lake.shop.orders"),
        rule("shop_*.orders_[!x]?", "lake.shop.orders"),
        rule(r"crm\.(users|teams)", "lake.crm.{table}", regex=True),
    ))
    assert job.canal_filter == r"shop\.orders,shop_.*\.orders_[^x].,crm\.(users|teams)"
    assert job.has_rules


def test_a_pattern_that_would_split_canals_filter_or_is_not_a_regex_is_refused():
    for text in ("a.b,c.d", r"db\.t_\d{1,3}"):  # (Canal 1.1.7 splits {1,3} too)
        with pytest.raises(PatternError, match="comma"):
            TablePattern(text, regex=True)
    with pytest.raises(PatternError, match="not a regex"):
        TablePattern("db.(t", regex=True)
    with pytest.raises(PatternError, match=r"schema\.table"):
        TablePattern("just_a_table")


def test_targets_are_named_by_templates_and_a_template_says_whether_tables_merge():
    assert TargetTemplate("lake.db.{schema}_{table}").format("shop", "orders") == "lake.db.shop_orders"
    with pytest.raises(PatternError, match="unknown placeholder"):
        TargetTemplate("lake.{db}.{table}")
    for text in ("lake.{schema}_{table}", "lake..{table}"):
        with pytest.raises(PatternError, match=r"catalog\.namespace\.table"):
            TargetTemplate(text)
    with pytest.raises(PatternError, match="nothing more"):
        TargetTemplate("lake.db.{table!r}")
    assert not merges(TablePattern("shop.*"), TargetTemplate("lake.shop.{table}"))
    assert merges(TablePattern("shop_*.orders"), TargetTemplate("lake.shop.{table}"))  # every schema's orders
    assert not merges(TablePattern("shop_*.*"), TargetTemplate("lake.{schema}.{table}"))
    assert merges(TablePattern("shop_*.orders_*"), TargetTemplate("lake.shop.orders"))
    assert not merges(TablePattern(r"s\.(a|b)", regex=True), TargetTemplate("lake.s.{table}"))
    assert merges(TablePattern(r"s\.t_\d+", regex=True), TargetTemplate("lake.s.t"))


def test_a_named_table_wins_over_a_rule_and_rules_are_tried_in_order():
    routes = Routes("j", (
        rule("shop.*", "lake.shop.{table}"),
        ChannelSettings("shop.orders", "lake.orders_by_hand"),
        rule("shop.o*", "lake.other.{table}"),
    ))
    assert routes.resolve("shop", "orders").target == "lake.orders_by_hand"
    made = routes.resolve("shop", "items")
    assert (made.source, made.target, made.rule, made.merged, made.pattern) == (
        "shop.items", "lake.shop.items", "shop.*", False, None)
    assert routes.resolve("crm", "users") is None


def test_shards_share_one_channel_named_by_their_pattern():
    routes = Routes("j", (rule("shop_*.orders_*", "lake.shop.orders", table_column="src_table"),
                          rule("eu_*.t_*", "lake.{schema}.t")))
    first, second = routes.resolve("shop_00", "orders_000"), routes.resolve("shop_01", "orders_127")
    assert first == second and first.merged and first.source == "shop_*.orders_*"
    assert first.table_column == "src_table"
    per_schema = routes.resolve("eu_1", "t_1")
    assert per_schema.source == "eu_*.t_* into lake.eu_1.t" and routes.resolve("eu_1", "t_2") == per_schema
    assert routes.rule_of("shop_*.orders_*") == "shop_*.orders_*" and routes.rule_of("eu_*.t_* into lake.x.t")
    assert routes.rule_of("shop_00.orders_000") == "shop_*.orders_*" and routes.rule_of("crm.users") is None


def test_a_table_a_rule_would_send_into_another_channels_target_is_refused():
    routes = Routes("j", (ChannelSettings("a.t", "lake.x.t"), rule("b.*", "lake.x.{table}")))
    with pytest.raises(RouteConflictError, match=r"b\.t would go into lake\.x\.t, which channel a\.t writes"):
        routes.resolve("b", "t")
    assert routes.resolve("b", "u").target == "lake.x.u"


def row_change(event_type, rows, *, table="orders_1"):
    change = entry_pb.RowChange(eventType=event_type)
    for before, after in rows:
        data = change.rowDatas.add()
        for image, values in ((data.beforeColumns, before), (data.afterColumns, after)):
            for index, (name, value) in enumerate((values or {}).items()):
                image.add(index=index, name=name, value=str(value), isKey=name == "id", mysqlType="int",
                          sqlType=4)
    return change


def test_a_shards_rows_record_where_they_came_from_and_may_be_keyed_by_it():
    mapper = RowMapper("shop_1.orders_1", None, by_name=True, before_images=BeforeImages.KEY_CHANGES,
                       origin=(("src_schema", "shop_1"), ("src_table", "orders_1")), origin_in_key=True)
    position = EntryPosition("bin.000001", 4)
    rows = mapper.map(row_change(entry_pb.EventType.UPDATE, [({"id": 1, "qty": 2}, {"id": 1, "qty": 3})]), position)
    assert [row.values for row in rows] == [("1", "3", "shop_1", "orders_1")]  # the key kept: no before image
    batch = mapper.batch(rows)
    assert batch.target_columns == ("id", "qty", "src_schema", "src_table")
    assert batch.key_indexes == (0, 2, 3)
    assert [c.mysql_type for c in batch.columns[2:]] == ["varchar(64)", "varchar(64)"]
    unkeyed = RowMapper("shop_1.orders_1", None, by_name=True, origin=(("src_table", "orders_1"),))
    unkeyed.map(row_change(entry_pb.EventType.INSERT, [(None, {"id": 1, "qty": 2})]), position)
    assert unkeyed.key_indexes == (0,)
