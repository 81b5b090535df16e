"""canal-python 0.4, the reference client, drains a real Canal reading MariaDB.

canal-python sends its password unscrambled, so, as against the dev server,
it gets a Canal server of its own with no client user. It runs in its own
process (its generated modules need the pure-Python protobuf backend).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.canal_server import CanalDestination, CanalServer

pytestmark = [pytest.mark.real, pytest.mark.interop]

DRAIN = Path(__file__).parents[1] / "canal" / "canal_python_drain.py"
DB = "pyclient"


@pytest.fixture
def open_canal(tmp_path, mariadb):
    """A second real Canal, without client credentials, reading only database ``pyclient``."""
    mariadb.create_database(DB)
    mariadb.execute("CREATE TABLE p (id INT PRIMARY KEY, label VARCHAR(20), amount DECIMAL(8,3))", database=DB)
    server = CanalServer(
        tmp_path / "canal-open", mariadb, [CanalDestination(DB, filter_regex=rf"{DB}\..*")], user="", password=""
    ).start()
    yield server
    server.stop()


def test_canal_python_drains_real_canal(open_canal, mariadb, tmp_path):
    mariadb.execute(
        "INSERT INTO p VALUES (1, 'one', 1.000), (2, 'two', 2.500)",
        "UPDATE p SET label = 'uno' WHERE id = 1",
        "DELETE FROM p WHERE id = 2",
        database=DB,
    )
    # Three autocommit statements: each QUERY (annotated SQL), rows, TRANSACTIONEND.
    out = tmp_path / "drained.json"
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    result = subprocess.run(
        [sys.executable, str(DRAIN), str(open_canal.port), DB, "9", str(out)],
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert result.returncode == 0, result.stderr
    drained = json.loads(out.read_text())

    assert drained["entries"] == 9
    assert drained["rows"] == 4
    assert drained["entry_types"] == {"ROWDATA": 6, "TRANSACTIONEND": 3}
    # The QUERY entries (annotated SQL) have no schema or table: canal-python files them under ".".
    # DECIMAL 1.000 arrives as "1.0": an all-zero fraction keeps one zero.
    assert drained["tables"] == {".": {}, f"{DB}.p": {'["1"]': {"id": "1", "label": "uno", "amount": "1.0"}}}
    assert mariadb.execute("SELECT id, label FROM p", database=DB) == [(1, "uno")]
