"""Our schemas are wire-identical to the ones canal-python 0.4 ships compiled.

canal-python is an independent source: its descriptors came from Canal's own
.proto files, not from ours. The only difference allowed is the documented
rename of PacketType.HEARTBEAT (see proto/CanalProtocol.proto), which both
sides made, so the two dumps must be equal outright.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DESCRIBE = Path(__file__).with_name("describe.py")


def dump(which: str) -> dict:
    env = dict(os.environ)
    if which == "canal-python":
        # Its generated code predates protobuf 4 and needs the Python backend.
        env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
    result = subprocess.run(
        [sys.executable, str(DESCRIBE), which], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def ours() -> dict:
    return dump("ours")


@pytest.fixture(scope="module")
def reference() -> dict:
    return dump("canal-python")


@pytest.mark.interop
def test_schemas_equal_canal_python(ours, reference):
    for file_name in ("CanalProtocol", "EntryProtocol"):
        assert ours[file_name]["package"] == "com.alibaba.otter.canal.protocol"
        assert ours[file_name]["enums"] == reference[file_name]["enums"], file_name
        assert sorted(ours[file_name]["messages"]) == sorted(reference[file_name]["messages"])
        for message, fields in reference[file_name]["messages"].items():
            assert ours[file_name]["messages"][message] == fields, f"{file_name}.{message}"


@pytest.mark.interop
def test_heartbeat_rename_is_the_documented_one(ours):
    packet_types = ours["CanalProtocol"]["enums"]["PacketType"]
    entry_types = ours["EntryProtocol"]["enums"]["EntryType"]
    assert packet_types["HEARTBEATS"] == 11 and "HEARTBEAT" not in packet_types
    assert entry_types["HEARTBEAT"] == 4


def test_dump_sees_every_message(ours):
    # Guards the comparison above against comparing two empty dumps.
    assert len(ours["CanalProtocol"]["messages"]) == 12
    assert len(ours["EntryProtocol"]["messages"]) == 8
    assert ours["EntryProtocol"]["messages"]["Column"]["mysqlType"]["number"] == 10
