"""``canalbridge cuts`` prints the job's newest consistent cut, each target's snapshot, and how to read them there;
``status`` shows it in a line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from canalbridge.daemon import cuts_command
from canalbridge.daemon.exit_codes import FAILED, OK
from canalbridge.daemon.status import job_json, render_text
from canalbridge.sync.model.cuts import PublishedCut
from canalbridge.sync.model.record import ChannelRecord, JobRecord, JobState
from canalbridge.sync.settings import CutSettings

CUT = PublishedCut(1_796_650_802_315, "cut-shop-1796650802315", "shop-1f0c9a2e-5170", "mysql-bin.000003:18861",
                   {"lake.shop.ledger": 8810946151225187431, "lake.shop.acct": 4417265730562710128},
                   1_796_650_802_315, "`lake`.canalbridge.cuts")


def status(cut: PublishedCut | None, error: str | None = None) -> dict[str, Any]:
    record = JobRecord("shop", JobState.RUNNING, (ChannelRecord("shop.acct", "lake.shop.acct"),), cut=cut,
                       cut_error=error)
    return job_json(record, None)


def run(monkeypatch: pytest.MonkeyPatch, shown: dict[str, Any], *, as_json: bool = False,
        cuts: CutSettings | None = None) -> int:
    config = SimpleNamespace(jobs=[SimpleNamespace(name="shop", cuts=cuts or CutSettings())])
    monkeypatch.setattr(cuts_command, "load", lambda args, secrets: config)
    monkeypatch.setattr(cuts_command, "daemon_job", lambda config, name: shown)
    return cuts_command.run(argparse.Namespace(config=Path("c.toml"), job="shop", json=as_json))


def test_the_cut_is_printed_with_each_targets_snapshot_and_the_query_that_reads_them(monkeypatch, capsys):
    assert run(monkeypatch, status(CUT)) == OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("job shop: consistent cut cut-shop-1796650802315 in `lake`.canalbridge.cuts, logged "
                        "2026-12-07T13:40:02Z")
    assert lines[1] == "  source position mysql-bin.000003:18861, transaction shop-1f0c9a2e-5170"
    assert lines[2:4] == ["  lake.shop.acct    snapshot 4417265730562710128",
                          "  lake.shop.ledger  snapshot 8810946151225187431"]
    assert "FROM lake.shop.acct VERSION AS OF 'cut-shop-1796650802315'" in lines[4]


def test_json_is_the_cut_as_status_shows_it(monkeypatch, capsys):
    assert run(monkeypatch, status(CUT), as_json=True) == OK
    assert json.loads(capsys.readouterr().out) == CUT.to_dict()


def test_no_cut_yet_fails_saying_when_one_comes_and_why_the_last_was_not_logged(monkeypatch, capsys):
    assert run(monkeypatch, status(None, "cut shop-a-3 at mysql-bin.000001:9: catalog refused")) == FAILED
    err = capsys.readouterr().err
    assert "no consistent cut logged yet" in err and "at most every 60.0 s" in err
    assert "the last one was not logged: cut shop-a-3 at mysql-bin.000001:9: catalog refused" in err
    assert run(monkeypatch, status(None), cuts=CutSettings(enabled=False)) == FAILED
    assert "[job.cuts] enabled = false" in capsys.readouterr().err
    assert run(monkeypatch, status(None), cuts=CutSettings(atomic=True)) == FAILED
    assert "[job.cuts] atomic: every commit moves all of its targets in one catalog commit" in capsys.readouterr().err


def test_status_shows_the_cut_in_one_line(monkeypatch):
    lines = render_text({"live": True, "jobs": [status(CUT, "cut x at y: refused")]}).splitlines()
    assert ("  consistent cut: cut-shop-1796650802315 at mysql-bin.000003:18861, 2 targets, logged "
            "2026-12-07T13:40:02Z (`canalbridge cuts shop`)") in lines
    assert "  last cut not logged: cut x at y: refused" in lines
