"""Channels made by rules: tables picked up as they appear, and shards merged into one target (dev server,
in-memory writers)."""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.settings import ChannelSettings, SchemaSettings
from tests.infra.memory_writer import InjectedFailure, InMemoryWriter

from .harness import Harness, job_settings

EventType = entry_pb.EventType
ID = ColumnDef.of("id", "int(11)", is_key=True)
NAME = ColumnDef.of("name", "varchar(8)")
QTY = ColumnDef.of("qty", "int(11)")


def harness_with(server, *channels: ChannelSettings, **writer_options) -> Harness:
    workload = Workload(WorkloadSpec(tables=(TableDef("db", "unused", (ID,)),), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), channels=channels)
    return Harness(server, workload, settings, **writer_options)


def rule(source: str, target: str, **options) -> ChannelSettings:
    return ChannelSettings(source, target, pattern=TablePattern(source), **options)


def insert(binlog: BinlogWriter, table: TableDef, *rows: dict) -> list[entry_pb.Entry]:
    return [*binlog.open(), binlog.rows(table, EventType.INSERT, [(None, row) for row in rows]), binlog.end()]


def feed(server, harness: Harness, entries: list[entry_pb.Entry]) -> None:
    server.feed("example", entries)
    harness.wait_acked(30)
    assert not harness.audit.violations, harness.audit.violations[:3]


def test_a_rule_picks_up_tables_as_they_appear_and_resumes_each_where_its_target_stands(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example", meta_flush_period_s=float("inf")))
    harness = harness_with(server, rule("db.*", "lake.db.{table}"))
    a, b, other = (TableDef("db", "a", (ID, NAME)), TableDef("db", "b", (ID, NAME)),
                   TableDef("other", "x", (ID, NAME)))
    binlog = BinlogWriter()
    harness.job.start()
    feed(server, harness, [*insert(binlog, a, {"id": 1, "name": "a1"}), *insert(binlog, other, {"id": 1, "name": "o"})])
    assert set(harness.writers) == {"db.a"}
    # A table created while the job runs: its channel opens with its first entry, mid-transaction.
    create = binlog.ddl("db", "b", EventType.CREATE, "CREATE TABLE b (id INT PRIMARY KEY, name VARCHAR(8))")
    feed(server, harness, [create, *binlog.open(), binlog.rows(a, EventType.INSERT, [(None, {"id": 2, "name": None})]),
                           binlog.rows(b, EventType.INSERT, [(None, {"id": 1, "name": "b1"})]), binlog.end()])
    assert harness.writers["db.b"].rows == {("1",): {"id": "1", "name": "b1"}}
    channels = {c.source: c for c in harness.job.record().channels}
    assert {s: (c.target, c.rule) for s, c in channels.items()} == {
        "db.a": ("lake.db.a", "db.*"), "db.b": ("lake.db.b", "db.*")}
    assert channels["db.b"].committed == harness.writers["db.b"].committed_position()
    # Canal crashes before it wrote its cursor down: it sends everything again to a job started afresh,
    # whose channels for db.a and db.b open with the first entry each and skip what their targets hold.
    harness.job.pause()
    assert server.destinations["example"].reparse_from_cursor(crashed=True) > 0
    harness.job.start()
    feed(server, harness, [*insert(binlog, b, {"id": 2, "name": "b2"})])
    harness.job.pause()
    assert sum(c.rows for c in harness.writers["db.b"].commits) == 2
    assert harness.job.stats.skipped > 0
    assert harness.writers["db.a"].rows == {("1",): {"id": "1", "name": "a1"}, ("2",): {"id": "2", "name": None}}
    assert "other.x" not in harness.writers


def test_shards_merge_into_one_target_keyed_by_where_each_row_came_from(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_with(server, rule("shop_*.orders_*", "lake.shop.orders", schema_column="src_schema",
                                        table_column="src_table", source_in_key=True))
    shards = [TableDef(f"shop_{s}", f"orders_{t}", (ID, NAME)) for s in (0, 1) for t in (0, 1)]
    binlog = BinlogWriter()
    entries = []
    for shard in shards:
        entries += insert(binlog, shard, {"id": 1, "name": shard.name})  # the same key in every shard
    harness.job.start()
    feed(server, harness, entries)
    harness.job.pause()
    writer = harness.writers["shop_*.orders_*"]
    assert writer.rows == {("1", s.schema, s.name): {"id": "1", "name": s.name, "src_schema": s.schema,
                                                      "src_table": s.name} for s in shards}


def test_a_ddl_on_one_shard_reaches_the_shared_target_once_and_the_others_catch_up(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_with(server, rule("shop.orders_*", "lake.shop.orders", table_column="src_table",
                                        source_in_key=True))
    old = [TableDef("shop", f"orders_{n}", (ID, NAME)) for n in (1, 2)]
    new = [TableDef("shop", f"orders_{n}", (ID, NAME, QTY)) for n in (1, 2)]
    binlog = BinlogWriter()
    entries = [*insert(binlog, old[0], {"id": 1, "name": "x"}), *insert(binlog, old[1], {"id": 1, "name": "y"})]
    first = binlog.ddl("shop", "orders_1", EventType.ALTER, "ALTER TABLE orders_1 ADD qty INT")
    # One source transaction across both shards, one through the ALTER and one not: two layouts.
    opened = binlog.open()
    layouts = [binlog.rows(new[0], EventType.INSERT, [(None, {"id": 2, "name": "x", "qty": 5})]),
               binlog.rows(old[1], EventType.INSERT, [(None, {"id": 2, "name": "y"})]),
               binlog.rows(new[0], EventType.INSERT, [(None, {"id": 3, "name": "x", "qty": 6})])]
    entries += [first, *opened, *layouts, binlog.end()]
    second = binlog.ddl("shop", "orders_2", EventType.ALTER, "ALTER TABLE orders_2 ADD qty INT")
    entries += [second, *insert(binlog, new[1], {"id": 3, "name": "y", "qty": 7})]
    harness.job.start()
    feed(server, harness, entries)
    harness.job.pause()
    writer = harness.writers["shop.orders_*"]
    assert list(writer.rows[("2", "orders_1")]) == ["id", "name", "qty", "src_table"]
    assert {key: row.get("qty") for key, row in writer.rows.items()} == {
        ("1", "orders_1"): None, ("1", "orders_2"): None, ("2", "orders_1"): "5", ("2", "orders_2"): None,
        ("3", "orders_1"): "6", ("3", "orders_2"): "7"}
    assert [sql for sql, _ in writer.alterations] == ["ALTER TABLE orders_1 ADD qty INT",
                                                      "ALTER TABLE orders_2 ADD qty INT"]
    stamps = [commit.end_position for commit in writer.commits]
    assert stamps == sorted(stamps) and EntryPosition.of(first) in stamps
    # The transaction's rows were applied in three steps, one per run of one layout, each stamped with its end.
    assert {EntryPosition.of(layouts[0]), EntryPosition.of(layouts[1])} <= set(stamps)
    assert harness.job.stats.rollbacks == 0


@pytest.mark.parametrize("fail_second_layout", [False, True], ids=["applied", "second-layout-fails"])
def test_a_source_transaction_across_two_shard_layouts_becomes_visible_at_once(dev_server_factory,
                                                                                fail_second_layout):
    """Issue 33, hole 5: the rows of one source transaction applied in steps (one per layout) reach readers
    together, and a step that fails takes the ones held before it along."""
    server = dev_server_factory(DestinationConfig("example"))
    old = [TableDef("shop", f"orders_{n}", (ID, NAME)) for n in (1, 2)]
    new = TableDef("shop", "orders_1", (ID, NAME, QTY))
    binlog = BinlogWriter()
    entries = [*insert(binlog, old[0], {"id": 1, "name": "x"}), *insert(binlog, old[1], {"id": 1, "name": "y"}),
               binlog.ddl("shop", "orders_1", EventType.ALTER, "ALTER TABLE orders_1 ADD qty INT"), *binlog.open()]
    layouts = [binlog.rows(new, EventType.INSERT, [(None, {"id": 2, "name": "x", "qty": 5})]),
               binlog.rows(old[1], EventType.INSERT, [(None, {"id": 2, "name": "y"})]),
               binlog.rows(new, EventType.INSERT, [(None, {"id": 3, "name": "x", "qty": 6})])]
    entries += [*layouts, binlog.end(), *insert(binlog, old[1], {"id": 4, "name": "y"})]
    whole = {("2", "orders_1"), ("2", "orders_2"), ("3", "orders_1")}
    seen: list[set] = []  # what readers see when each apply starts
    failed: list[Position] = []

    def look(writer: InMemoryWriter, end: Position) -> None:
        seen.append(set(writer.rows))
        if fail_second_layout and end == EntryPosition.of(layouts[1]) and not failed:
            failed.append(end)
            raise InjectedFailure("the second layout's step fails")

    harness = harness_with(server, rule("shop.orders_*", "lake.shop.orders", table_column="src_table",
                                        source_in_key=True), **{"shop.orders_*": {"before_commit": look}})
    harness.job.start()
    feed(server, harness, entries)
    harness.job.pause()
    writer = harness.writers["shop.orders_*"]
    assert set(writer.rows) == {("1", "orders_1"), ("1", "orders_2"), ("4", "orders_2")} | whole
    stamps = [commit.end_position for commit in writer.commits]
    # The transaction was applied in three steps (one per run of one layout): readers saw none of them alone.
    assert {EntryPosition.of(layouts[0]), EntryPosition.of(layouts[1])} <= set(stamps)
    assert all(not whole & keys or whole <= keys for keys in seen), seen
    assert len(failed) == fail_second_layout and harness.job.stats.rollbacks == fail_second_layout
    # Only the last step carries the commit's label: a read-back that finds it knows the whole commit landed.
    labels = [commit.label for commit in writer.commits]
    for index, label in enumerate(labels):
        commit, step, _ = label.partition("~")
        assert not step or commit in labels[index + 1:], labels
        assert not any(later.startswith(f"{commit}~") for later in labels[index + 1:]) or step, labels


def test_a_channel_follows_its_table_through_renames_when_the_job_says_so(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example", meta_flush_period_s=float("inf")))
    workload = Workload(WorkloadSpec(tables=(TableDef("db", "unused", (ID,)),), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), channels=(ChannelSettings("db.orders", "lake.o"),),
                                   schema=SchemaSettings(rename_table="follow"))
    assert settings.canal_filter == r"db\..*"  # Canal sends a renamed table's rows only if the filter takes them
    harness = Harness(server, workload, settings)
    orders, v2, v3 = (TableDef("db", name, (ID, NAME)) for name in ("orders", "orders_v2", "orders_v3"))
    binlog = BinlogWriter()
    harness.job.start()
    # Canal names the new table in a RENAME's header.
    feed(server, harness, [*insert(binlog, orders, {"id": 1, "name": "a"}),
                           binlog.ddl("db", "orders_v2", EventType.RENAME, "RENAME TABLE orders TO orders_v2"),
                           *insert(binlog, v2, {"id": 2, "name": "b"}),
                           *insert(binlog, orders, {"id": 9, "name": "a new table of the old name"})])
    writer = harness.writers["db.orders"]
    assert writer.rows == {("1",): {"id": "1", "name": "a"}, ("2",): {"id": "2", "name": "b"}}
    assert writer.read_state().source_table == "db.orders_v2"
    # Canal crashes before it wrote its cursor down, and the job starts afresh: the target tells it the name.
    harness.job.pause()
    assert server.destinations["example"].reparse_from_cursor(crashed=True) > 0
    harness.job.start()
    feed(server, harness, [binlog.ddl("db", "orders_v3", EventType.RENAME, "ALTER TABLE orders_v2 RENAME TO orders_v3"),
                           *insert(binlog, v2, {"id": 8, "name": "gone"}),  # (a table of that name: not this one)
                           *insert(binlog, v3, {"id": 3, "name": "c"})])
    harness.job.pause()
    assert writer.rows == {(k,): {"id": k, "name": n} for k, n in (("1", "a"), ("2", "b"), ("3", "c"))}
    assert writer.read_state().source_table == "db.orders_v3"
    assert sum(c.rows for c in writer.commits) == 3  # nothing applied twice in the replay


def test_by_default_a_channel_stays_with_its_tables_name_through_a_rename(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_with(server, ChannelSettings("db.orders", "lake.o"))
    assert harness.job.settings.canal_filter == r"db\.orders"
    orders, v2 = (TableDef("db", name, (ID, NAME)) for name in ("orders", "orders_v2"))
    binlog = BinlogWriter()
    harness.job.start()
    feed(server, harness, [*insert(binlog, orders, {"id": 1, "name": "a"}),
                           binlog.ddl("db", "orders_v2", EventType.RENAME, "RENAME TABLE orders TO orders_v2"),
                           *insert(binlog, v2, {"id": 2, "name": "b"}),
                           *insert(binlog, orders, {"id": 3, "name": "c"})])
    harness.job.pause()
    writer = harness.writers["db.orders"]
    assert writer.rows == {("1",): {"id": "1", "name": "a"}, ("3",): {"id": "3", "name": "c"}}
    assert writer.read_state().source_table is None and writer.alterations == []


def test_a_column_renamed_shard_by_shard_takes_the_other_shards_rows_under_its_old_name_until_theirs(
        dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(TableDef("db", "unused", (ID,)),), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), channels=(
        rule("shop.orders_*", "lake.shop.orders", table_column="src_table", source_in_key=True),))
    harness = Harness(server, workload, settings, **{"shop.orders_*": {"columns": ("id", "name", "src_table")}})
    old = [TableDef("shop", f"orders_{n}", (ID, NAME)) for n in (1, 2)]
    new = [TableDef("shop", f"orders_{n}", (ID, ColumnDef.of("label", "varchar(8)"))) for n in (1, 2)]
    binlog = BinlogWriter()
    harness.job.start()
    rename = "ALTER TABLE orders_1 RENAME COLUMN name TO label"
    feed(server, harness, [*insert(binlog, old[0], {"id": 1, "name": "a"}),
                           *insert(binlog, old[1], {"id": 1, "name": "b"}),
                           binlog.ddl("shop", "orders_1", EventType.ALTER, rename),
                           *insert(binlog, new[0], {"id": 2, "label": "c"}),
                           *insert(binlog, old[1], {"id": 2, "name": "d"})])
    # A new run learns from the target which old name the other shard still sends.
    harness.job.pause()
    harness.job.start()
    change = "ALTER TABLE orders_2 CHANGE name label VARCHAR(8)"
    feed(server, harness, [*insert(binlog, old[1], {"id": 3, "name": "e"}),
                           binlog.ddl("shop", "orders_2", EventType.ALTER, change),
                           *insert(binlog, new[1], {"id": 4, "label": "f"})])
    harness.job.pause()
    writer = harness.writers["shop.orders_*"]
    assert writer.columns == ("id", "label", "src_table")
    assert {key: row for key, row in writer.rows.items()} == {
        (str(i), f"orders_{s}"): {"id": str(i), "label": v, "src_table": f"orders_{s}"}
        for i, s, v in ((1, 1, "a"), (1, 2, "b"), (2, 1, "c"), (2, 2, "d"), (3, 2, "e"), (4, 2, "f"))}
    assert writer.read_state().aliases == {"name": "label"}
    assert harness.job.state is JobState.PAUSED and harness.job.fail_message is None


def test_after_a_restart_a_table_taking_a_followed_tables_old_name_stays_out_of_its_target(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(TableDef("db", "unused", (ID,)),), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), channels=(ChannelSettings("db.orders", "lake.o"),),
                                   schema=SchemaSettings(rename_table="follow"))
    harness = Harness(server, workload, settings)
    orders, v2 = (TableDef("db", name, (ID, NAME)) for name in ("orders", "orders_v2"))
    binlog = BinlogWriter()
    harness.job.start()
    feed(server, harness, [*insert(binlog, orders, {"id": 1, "name": "a"}),
                           binlog.ddl("db", "orders_v2", EventType.RENAME, "RENAME TABLE orders TO orders_v2")])
    harness.job.pause()
    # The next run learns the name from the target; a new table of the old name is another table.
    harness.job.start()
    feed(server, harness, [*insert(binlog, orders, {"id": 9, "name": "a new table of the old name"}),
                           *insert(binlog, v2, {"id": 2, "name": "b"})])
    harness.job.pause()
    writer = harness.writers["db.orders"]
    assert writer.rows == {("1",): {"id": "1", "name": "a"}, ("2",): {"id": "2", "name": "b"}}


@pytest.mark.parametrize("failure", [
    {"fail_alter_at": {1}},  # the rename itself fails: the replay reads it again
    {"fail_commit_at": {2}},  # the rename landed; the commit after it fails: its replay routes by the new name
], ids=["rename-fails", "commit-after-rename-fails"])
def test_a_followed_rename_in_a_failed_commit_is_routed_the_same_way_in_the_replay(dev_server_factory, failure):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(TableDef("db", "unused", (ID,)),), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), channels=(ChannelSettings("db.orders", "lake.o"),),
                                   schema=SchemaSettings(rename_table="follow"))
    harness = Harness(server, workload, settings, **{"db.orders": failure})
    orders, v2 = (TableDef("db", name, (ID, NAME)) for name in ("orders", "orders_v2"))
    binlog = BinlogWriter()
    harness.job.start()
    feed(server, harness, [*insert(binlog, orders, {"id": 1, "name": "a"}),
                           binlog.ddl("db", "orders_v2", EventType.RENAME, "RENAME TABLE orders TO orders_v2")])
    # Acked through the rename: a replay of what follows starts after it.
    feed(server, harness, [*insert(binlog, v2, {"id": 2, "name": "b"}),
                           *insert(binlog, orders, {"id": 9, "name": "a new table of the old name"})])
    harness.job.pause()
    writer = harness.writers["db.orders"]
    assert harness.job.stats.rollbacks == 1  # the failure happened, and was replayed
    assert writer.rows == {("1",): {"id": "1", "name": "a"}, ("2",): {"id": "2", "name": "b"}}
    assert writer.read_state().source_table == "db.orders_v2"
    assert sum(c.rows for c in writer.commits) == 2  # nothing applied twice in the replay
