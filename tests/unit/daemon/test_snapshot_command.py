"""``canalbridge snapshot`` follows each table's progress on the channel that shows it, to its end: a merged
target's shards on the channel named by their pattern, once."""

from __future__ import annotations

import argparse
import dataclasses
import json as _json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from canalbridge.daemon import snapshot_command
from canalbridge.daemon.exit_codes import FAILED, OK
from canalbridge.sync.snapshot.progress import SnapshotStatus

MERGED = "shop_*.orders"
STARTED = {"tables": ["shop.users", "shop_1.orders", "shop_2.orders"],
           "snapshot_channels": ["shop.users", MERGED, MERGED]}


def job(**shown: SnapshotStatus) -> dict[str, Any]:
    return {"name": "shop", "state": "RUNNING", "fail_message": None,
            "channels": [{"source": source, "snapshot": dataclasses.asdict(shown[key]) if key in shown else None}
                         for source, key in (("shop.users", "users"), (MERGED, "merged"), ("shop.items", "items"))]}


def run(monkeypatch: pytest.MonkeyPatch, statuses: list[dict[str, Any]], started: dict[str, Any], *,
        json: bool = False) -> int:
    """The command's exit status, the daemon answering the start with ``started`` and showing ``statuses``."""
    seen: Iterator[dict[str, Any]] = iter(statuses)
    monkeypatch.setattr(snapshot_command, "POLL_S", 0)
    monkeypatch.setattr(snapshot_command, "load", lambda args, secrets: object())
    monkeypatch.setattr(snapshot_command, "post_action", lambda config, name, action, query, hint: started)
    monkeypatch.setattr(snapshot_command, "daemon_job", lambda config, name: next(seen))
    return snapshot_command.run(argparse.Namespace(config=Path("c.toml"), job="shop", tables=[], where=None,
                                                   cancel=False, no_wait=False, json=json))


def test_a_named_table_and_two_shards_are_followed_on_their_two_channels_until_both_ended(monkeypatch, capsys):
    reading = SnapshotStatus("reading", 1, 10, None, None, 5.0)
    assert run(monkeypatch, [job(users=reading, merged=SnapshotStatus("waiting")),
                             job(users=SnapshotStatus("finished", 2, 20), merged=reading),
                             job(users=SnapshotStatus("finished", 2, 20), merged=SnapshotStatus("finished", 3, 30))],
               STARTED) == OK
    out = capsys.readouterr().out
    assert f"  {MERGED}: finished, 3 chunks, 30 rows in this run" in out
    assert out.endswith("job shop: snapshot done\n")


def test_a_patterns_table_dropped_meanwhile_ends_the_following(monkeypatch, capsys):
    started = {"tables": ["shop.items"], "snapshot_channels": ["shop.items"]}
    assert run(monkeypatch, [job(items=SnapshotStatus("gone"))], started) == OK
    assert "  shop.items: gone" in capsys.readouterr().out


def test_a_daemon_that_names_no_channels_is_followed_by_table(monkeypatch, capsys):
    assert run(monkeypatch, [job(users=SnapshotStatus("finished", 1, 5))], {"tables": ["shop.users"]}) == OK


def test_a_parked_table_ends_the_following_with_its_cause_and_way_out_and_fails(monkeypatch, capsys):
    started = {"tables": ["shop.items"], "snapshot_channels": ["shop.items"]}
    parked = SnapshotStatus("parked", error="Unknown column 'flag'; its changes stream on. To go on: ...")
    assert run(monkeypatch, [job(items=SnapshotStatus("reading", 1, 10)), job(items=parked)], started) == FAILED
    out = capsys.readouterr().out
    assert "  shop.items: parked: Unknown column 'flag'; its changes stream on" in out
    assert out.endswith("job shop: snapshot parked (shop.items)\n")


def test_json_prints_no_progress_and_one_document_with_how_each_table_ended(monkeypatch, capsys):
    started = {"tables": ["shop.users", "shop.items"], "snapshot_channels": ["shop.users", "shop.items"]}
    parked = SnapshotStatus("parked", error="Unknown column 'flag'")
    assert run(monkeypatch, [job(users=SnapshotStatus("reading", 1, 10), items=SnapshotStatus("waiting")),
                             job(users=SnapshotStatus("finished", 2, 20), items=parked)], started, json=True) == FAILED
    document = _json.loads(capsys.readouterr().out)
    assert document["result"] == "parked"
    assert {table: each["phase"] for table, each in document["snapshots"].items()} == {
        "shop.users": "finished", "shop.items": "parked"}
