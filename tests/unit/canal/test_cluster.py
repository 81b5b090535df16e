"""What a Canal HA cluster's running node in ZooKeeper may say: an active server's ``host:port``, checked before
the job connects to it (ZooKeeper's contents are not the job's to trust)."""

from __future__ import annotations

import pytest

from canalbridge.canal.cluster import CanalCluster, CanalClusterError, ServerAddress


@pytest.mark.parametrize(("text", "host", "port"), [
    ("127.0.0.1:11111", "127.0.0.1", 11111),
    ("canal-1.db.internal:11111", "canal-1.db.internal", 11111),
    ("[::1]:11111", "::1", 11111),
])
def test_a_running_server_is_host_and_port(text, host, port):
    assert ServerAddress.parse(text) == ServerAddress(host, port)


@pytest.mark.parametrize("text", ["127.0.0.1", ":11111", "h:0", "h:65536", "h:1x", "a b:1", "h;id:1", "h:-1",
                                  "x" * 300 + ":1", "h:11111\n"])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError, match="not host:port"):
        ServerAddress.parse(text)


def cluster() -> CanalCluster:
    return CanalCluster("127.0.0.1:1", "example", "1001")  # (never started: these read node contents only)


def test_the_running_node_canal_writes_names_its_server():
    node = b'{"active":true,"address":"10.0.0.7:11111","cid":1}'
    assert cluster()._parse(node) == ServerAddress("10.0.0.7", 11111)
    assert cluster()._parse(b'{"active":false,"address":"10.0.0.7:11111"}') is None  # (released: none runs it)


@pytest.mark.parametrize("node", [b"not json", b"[]", b'{"active":true}', b'{"address":7}',
                                  b'{"address":"10.0.0.7:11111; drop"}', b"\xff\xfe"])
def test_a_node_that_is_not_canals_is_an_error_naming_the_destination(node):
    with pytest.raises(CanalClusterError, match="destination 'example': its running node is not Canal's"):
        cluster()._parse(node)
