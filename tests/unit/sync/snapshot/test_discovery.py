"""The tables a job's rules take are found in the source as the stream would route them: a channel named for a
table wins, then the first rule that matches; never the signal table, nor a system schema. Those whose targets
hold a finished snapshot are left; a merged target's tables each keep their own progress in it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from canalbridge.source_db import TableKeyError
from canalbridge.sync.errors import SnapshotError
from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.settings import ChannelSettings, JobSettings, SnapshotSettings
from canalbridge.sync.snapshot import discovery
from canalbridge.sync.snapshot.discovery import keyed, rule_tables, unfinished
from canalbridge.sync.snapshot.progress import TableProgress
from canalbridge.sync.snapshot.runner import SnapshotTable
from canalbridge.sync.source.canal.settings import CanalSettings

SNAPSHOT = SnapshotSettings(host="h", user="u", signal_table="shop.canalbridge_signal")


def rule(source: str, target: str) -> ChannelSettings:
    return ChannelSettings(source, target, pattern=TablePattern(source))


def job(*channels: ChannelSettings) -> JobSettings:
    return JobSettings("j", CanalSettings("h", 1, "d"), channels, snapshot=SNAPSHOT)


class FakeDb:
    """Answers information_schema with ``tables`` (schema, table), as the server filters and orders them."""

    def __init__(self, tables: Sequence[tuple[str, str]]) -> None:
        self.tables = tables
        self.asked: list[tuple[str, Sequence[object]]] = []

    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[str, str]]:
        self.asked.append((sql, params))
        return sorted(t for t in self.tables if t[0] not in params)


SOURCE = [("shop", "canalbridge_signal"), ("shop", "orders"), ("shop", "users"), ("shard_1", "orders"),
          ("shard_2", "orders"), ("mysql", "user"), ("other", "t")]


def test_each_table_goes_to_the_channel_the_stream_would_give_it():
    settings = job(ChannelSettings("shop.users", "lake.shop.people"), rule("shop.*", "lake.shop.{table}"),
                   rule("shard_*.orders", "lake.all.orders"), rule("shop.orders", "lake.never.orders"))
    found = rule_tables(FakeDb(SOURCE), settings)  # type: ignore[arg-type]
    assert [(t.name, t.channel.target, t.channel.merged) for t in found] == [
        ("shard_1.orders", "lake.all.orders", True), ("shard_2.orders", "lake.all.orders", True),
        ("shop.orders", "lake.shop.orders", False)]  # (users: its own channel; the signal table: never)
    assert all(t.channel.rule is not None and t.channel.pattern is None for t in found)


def test_the_server_is_asked_for_tables_and_system_versioned_tables_outside_its_own_schemas():
    db = FakeDb(SOURCE)
    rule_tables(db, job(rule("shop.*", "lake.shop.{table}")))  # type: ignore[arg-type]
    ((sql, params),) = db.asked
    assert "TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')" in sql and "TABLE_SCHEMA NOT IN" in sql
    assert set(params) == {"mysql", "information_schema", "performance_schema", "sys"}


def test_a_job_without_rules_asks_nothing():
    db = FakeDb(SOURCE)
    assert rule_tables(db, job(ChannelSettings("shop.orders", "lake.shop.orders"))) == []  # type: ignore[arg-type]
    assert db.asked == []


def test_two_tables_a_rule_sends_to_one_named_target_are_a_conflict_named_as_the_stream_would():
    settings = job(ChannelSettings("shop.orders", "lake.shop.orders"), rule("shard_*.orders", "lake.shop.orders"))
    with pytest.raises(SnapshotError, match=r"shard_1\.orders"):
        rule_tables(FakeDb(SOURCE), settings)  # type: ignore[arg-type]


def test_tables_whose_targets_hold_a_finished_snapshot_are_left_and_the_others_resume():
    settings = job(rule("shop.*", "lake.shop.{table}"), rule("shard_*.orders", "lake.all.orders"))
    found = rule_tables(FakeDb([*SOURCE, ("shop", "items")]), settings)  # type: ignore[arg-type]
    halfway = TableProgress("s1", "shop.orders", (100,), done=(40,), key=("id",))
    shard = TableProgress("s1", "shard_2.orders", (9,), done=(3,), key=("id",))
    held = {"lake.shop.orders": {"shop.orders": halfway},
            "lake.shop.users": {"shop.users": TableProgress("s1", "shop.users", (9,), done=(9,), key=("id",))},
            # A merged target: one shard done, one halfway.
            "lake.all.orders": {"shard_1.orders": TableProgress("s1", "shard_1.orders", (5,), (5,), ("id",)),
                                "shard_2.orders": shard}}
    asked: list[str] = []

    def progress(target: str) -> dict[str, TableProgress]:
        asked.append(target)
        return held.get(target, {})

    tables = unfinished(found, progress)
    assert [(t.name, t.progress) for t in tables] == [("shard_2.orders", shard), ("shop.items", None),
                                                      ("shop.orders", halfway)]
    assert all(t.channel is not None and t.channel.target == held_in for t, held_in in
               zip(tables, ["lake.all.orders", "lake.shop.items", "lake.shop.orders"]))
    assert sorted(asked) == sorted(set(asked)), "each target is read once, a merged one too"


def test_a_table_without_a_usable_key_is_left_to_the_stream_saying_why(monkeypatch):
    def table_key(db: object, schema: str, table: str, key: object) -> object:
        if table == "log":
            raise TableKeyError("no primary key; set the channel's `key`", address="h:3306", table=f"{schema}.{table}")
        return object()

    monkeypatch.setattr(discovery, "table_key", table_key)
    cut, left = keyed(FakeDb([]), [SnapshotTable("shop", "orders"), SnapshotTable("shop", "log")])  # type: ignore[arg-type]
    assert [t.name for t in cut] == ["shop.orders"]
    assert left == [("shop.log", "no primary key; set the channel's `key`")]
