"""Helpers for the real-stack services the tests start: ports, bounded waits, process stops, log tails.

Every wait here polls a real condition against a deadline; none of them
sleeps in place of synchronisation.
"""

from __future__ import annotations

import collections
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Self

LOOPBACK = "127.0.0.1"
POLL_INTERVAL_S = 0.1
# A free port we picked can be taken before the service binds it (other suites
# run beside ours): a service that logs this retries on a new port, this often.
PORT_TAKEN = "Address already in use"
PORT_ATTEMPTS = 3


class ServiceError(RuntimeError):
    """A real-stack service could not be started, reached or stopped."""


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORTS_BELOW_EPHEMERAL = 12000  # how far below the ephemeral range free_port looks
# The ports free_port handed out lately in this process. A port is free when probed and bound only once its
# service starts, so two asked for together (a Spark master's RPC and web UI ports) could otherwise be the same
# one: the master then moved its web UI to the next port, and the test polled the RPC port over HTTP.
_handed_out: collections.deque[int] = collections.deque(maxlen=1024)
_handed_out_lock = threading.Lock()


def free_port(host: str = LOOPBACK) -> int:
    """A port on ``host`` that nothing uses right now, below the OS's ephemeral range, and not one this
    process handed out lately (whoever asked for it may not have bound it yet).

    Port 0 would get one from the ephemeral range, where outgoing connections
    take their local ports too: a service started (or restarted) on it later
    can find it taken, as a daemon's metrics port once was in CI. Below that
    range only explicit binds take ports.
    """
    try:
        low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    ports = worker_share(range(max(1024, low - PORTS_BELOW_EPHEMERAL), low))
    with _handed_out_lock:
        for port in random.sample(ports, min(100, len(ports))):
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind((host, port))
                except OSError:
                    continue
            _handed_out.append(port)
            return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:  # nothing below: let the OS pick
            probe.bind((host, 0))
            chosen: int = probe.getsockname()[1]
        _handed_out.append(chosen)
        return chosen


def worker_share(ports: range) -> range:
    """This pytest-xdist worker's slice of ``ports`` (all of them outside xdist).

    A port is probed free and bound later, by a service or a daemon that
    may not retry: two workers picking from one range could both take the
    same one in between. Each worker picks from its own slice instead. The
    processes a worker starts inherit its environment, and with it its slice.
    """
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 1):
        return ports
    # (A worker xdist starts to replace a crashed one gets the next name, gw2 of 2: it takes a slice too.)
    index, size = int(worker[2:]) % int(count), len(ports) // int(count)
    return ports[index * size:(index + 1) * size]


def port_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True when a TCP connection to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout_s: float = 5.0) -> bool:
    """True when a GET of ``url`` answers 200 (a server that is not listening yet, or errs, is not)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return bool(answer.status == 200)
    except OSError:  # (urllib's URLError and HTTPError among them)
        return False


def wait_for(
    condition: Callable[[], bool],
    timeout_s: float,
    *,
    alive: Callable[[], bool] = lambda: True,
) -> bool:
    """Poll ``condition`` until it holds (True), ``alive`` turns False or the time is up (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if not alive() or time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL_S)


def stop_process(process: subprocess.Popen[bytes], term_timeout_s: float, kill_timeout_s: float = 10.0) -> str:
    """SIGTERM, wait up to ``term_timeout_s``, then SIGKILL; returns how it ended ("exited", "term", "kill")."""
    if process.poll() is not None:
        return "exited"
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=term_timeout_s)
        return "term"
    except subprocess.TimeoutExpired:
        pass
    process.kill()
    try:
        process.wait(timeout=kill_timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(f"pid {process.pid} survived SIGKILL for {kill_timeout_s} s") from exc
    return "kill"


def kill_process(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGKILL at once (a crash), and reap it."""
    if process.poll() is None:
        process.kill()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(f"pid {process.pid} survived SIGKILL for {timeout_s} s") from exc


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file, or a note that it is missing."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"({path}: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


def read_from(path: Path, offset: int) -> str:
    """A text file from byte ``offset`` on ("" when it is missing)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def find_binary(name: str) -> str | None:
    """``name`` on PATH or in the sbin directories a non-login PATH may lack."""
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        candidate = Path(directory, name)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


class ServiceProcess:
    """A service run as one child process: stopped cleanly, killed as a crash, or restarted.

    Subclasses start it (setting ``_process``) and say in ``stop_timeout_s``
    how long a clean stop may take before SIGKILL.
    """

    stop_timeout_s = 30.0
    _process: subprocess.Popen[bytes] | None

    def start(self) -> Self:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def stop(self, timeout_s: float | None = None) -> str:
        """SIGTERM (a clean shutdown), SIGKILL after the timeout; the data directory stays."""
        if self._process is None:
            return "exited"
        try:
            return stop_process(self._process, self.stop_timeout_s if timeout_s is None else timeout_s)
        finally:
            self._process = None

    def kill(self) -> None:
        """SIGKILL now, as a crash."""
        if self._process is not None:
            kill_process(self._process)
            self._process = None

    def restart(self, timeout_s: float | None = None) -> Self:
        """Stop cleanly and start again on the same port and data directory."""
        self.stop(timeout_s)
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
