"""``canalbridge verify`` follows the daemon's checks to their end and says by its exit status what it found."""

from __future__ import annotations

import argparse
import dataclasses
import json as _json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from canalbridge.daemon import verify_command
from canalbridge.daemon.exit_codes import DIFFERS, OK, UNTOLD
from canalbridge.sync.snapshot.verify import Difference, TableCheck

TABLES = ["shop.orders", "shop.users"]


def job(state: str = "RUNNING", **checks: TableCheck) -> dict[str, Any]:
    return {"name": "shop", "state": state, "fail_message": None,
            "channels": [{"source": table, "verify": dataclasses.asdict(checks[table.split(".")[1]])
                          if table.split(".")[1] in checks else None} for table in TABLES]}


def run(monkeypatch: pytest.MonkeyPatch, statuses: list[dict[str, Any]], *, cancel: bool = False,
        actions: list[str] | None = None, json: bool = False) -> int:
    """The command's exit status, the daemon showing ``statuses`` in turn (``actions``: what was asked of it)."""
    seen: Iterator[dict[str, Any]] = iter(statuses)
    asked = actions if actions is not None else []
    monkeypatch.setattr(verify_command, "POLL_S", 0)
    monkeypatch.setattr(verify_command, "load", lambda args, secrets: object())
    monkeypatch.setattr(verify_command, "post_action", lambda config, name, action, query, hint: (
        asked.append(action), {"tables": TABLES, "verify_id": "v1"})[1])
    monkeypatch.setattr(verify_command, "daemon_job", lambda config, name: next(seen))
    return verify_command.run(argparse.Namespace(config=Path("c.toml"), job="shop", tables=[], no_wait=False,
                                                 cancel=cancel, json=json))


def test_every_table_equal_exits_0_once_all_ended(monkeypatch, capsys):
    checking = TableCheck("v1", "checking", 1, 50)
    assert run(monkeypatch, [job(orders=checking, users=TableCheck("v1", "waiting")),
                             job(orders=TableCheck("v1", "equal", 2, 80), users=checking),
                             job(orders=TableCheck("v1", "equal", 2, 80), users=TableCheck("v1", "equal", 1, 9))]) == OK
    out = capsys.readouterr().out
    assert "  shop.orders: verify: equal, 2 chunks, 80 rows compared" in out
    assert out.endswith("job shop: every target equals its source\n")


def test_a_chunk_that_differs_exits_6_with_the_command_that_repairs_it(monkeypatch, capsys):
    differs = TableCheck("v1", "differs", 2, 80, (Difference("50", "100", 1, ("77",), "((`id` > 50))"),))
    assert run(monkeypatch, [job(orders=differs, users=TableCheck("v1", "equal", 1, 9))]) == DIFFERS
    out = capsys.readouterr().out
    assert "repair: canalbridge snapshot -c c.toml shop shop.orders --where '((`id` > 50))'" in out
    assert "job shop: shop.orders differ from the source" in out


@pytest.mark.parametrize("status, says", [
    (job(orders=TableCheck("v1", "equal"), users=TableCheck("v1", "failed", error="source gone")),
     "job shop: verify could not finish shop.users"),
    (job(orders=TableCheck("v2", "checking"), users=TableCheck("v2", "waiting")),
     "holds this verify no more: it was restarted, or another verify began"),
    (job(), "holds this verify no more"),  # (a restarted job shows no verify)
    (job("PAUSED"), "error: job shop is PAUSED; the verify stopped with it"),
    (job(orders=TableCheck("v1", "equal"), users=TableCheck("v1", "cancelled")),
     "job shop: verify could not finish shop.users"),
])
def test_a_verify_that_cannot_tell_exits_5_saying_why(monkeypatch, capsys, status, says):
    assert run(monkeypatch, [status]) == UNTOLD
    assert says in capsys.readouterr().err


def test_cancel_asks_the_daemon_to_cancel_the_verify_and_follows_nothing(monkeypatch, capsys):
    actions: list[str] = []
    assert run(monkeypatch, [], cancel=True, actions=actions) == OK
    assert actions == ["cancel-verify"]
    assert capsys.readouterr().out.startswith("job shop: the verify of shop.orders, shop.users is cancelled; it ends")


def test_json_prints_no_progress_and_one_document_with_each_tables_check(monkeypatch, capsys):
    differs = TableCheck("v1", "differs", 2, 80, (Difference("50", "100", 1, ("77",), "((`id` > 50))"),))
    assert run(monkeypatch, [job(orders=TableCheck("v1", "checking"), users=TableCheck("v1", "waiting")),
                             job(orders=differs, users=TableCheck("v1", "equal", 1, 9))], json=True) == DIFFERS
    document = _json.loads(capsys.readouterr().out)
    assert document["result"] == "differs" and document["job"] == "shop"
    assert document["checks"]["shop.orders"]["differences"][0]["where"] == "((`id` > 50))"
    assert document["checks"]["shop.users"]["phase"] == "equal"
