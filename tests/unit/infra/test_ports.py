"""The ports the real stack's services are started on."""

from __future__ import annotations

import collections
import socket

from tests.infra import processes


def _two_free_ports() -> int:
    """A port ``p`` such that ``p`` and ``p + 1`` are both free on loopback (below the ephemeral range)."""
    for port in range(20000, 30000, 2):
        with socket.socket() as first, socket.socket() as second:
            try:
                first.bind((processes.LOOPBACK, port))
                second.bind((processes.LOOPBACK, port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two free ports side by side")


def test_ports_asked_for_together_before_either_is_bound_differ(monkeypatch):
    # (As a Spark master's RPC and web UI ports are: the same one twice made it move its web UI elsewhere.)
    port = _two_free_ports()
    monkeypatch.setattr(processes, "_handed_out", collections.deque(maxlen=8))  # (none handed out before)
    monkeypatch.setattr(processes, "worker_share", lambda ports: range(port, port + 2))
    monkeypatch.setattr(processes.random, "sample", lambda population, k: list(population)[:k])
    assert [processes.free_port(), processes.free_port()] == [port, port + 1]
