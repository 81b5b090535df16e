"""canal-python 0.4, a client nobody here wrote, drains the dev server correctly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter
from canalbridge.devkit.workload import Workload, WorkloadSpec

DRAIN = Path(__file__).with_name("canal_python_drain.py")


@pytest.mark.interop
def test_canal_python_drains_a_workload_and_acks_it(dev_server_factory, tmp_path):
    # canal-python sends the password unscrambled and ignores the seed, so it
    # can only talk to a server without a password, as against a real Canal.
    server = dev_server_factory(DestinationConfig("example", capacity=1024))
    workload = Workload(WorkloadSpec(row_changes=1500, ddl_every=7, seed=7), BinlogWriter(gtid_uuid="u-7"))
    entries = list(workload)
    server.feed("example", entries)
    out = tmp_path / "drained.json"
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    result = subprocess.run(
        [sys.executable, str(DRAIN), str(server.port), "example", str(len(entries)), str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    drained = json.loads(out.read_text())

    assert drained["entries"] == len(entries)
    assert drained["rows"] == 1500
    assert drained["entry_types"]["TRANSACTIONBEGIN"] == drained["entry_types"]["TRANSACTIONEND"] > 0
    for name, expected in workload.expected.items():
        want = {json.dumps(list(key)): row for key, row in expected.canal_rows().items()}
        assert drained["tables"][name] == want, name
    # canal-python acked every batch it took: the server's ack cursor is at the end.
    assert server.destinations["example"].store.wait_for(lambda c: c.ack == c.put, 10)
