"""A configuration file the tests start from, and how they write one."""

from __future__ import annotations

from pathlib import Path

VALID = """
[daemon]
state_dir = "state"

[[job]]
name = "a"
[job.canal]
host = "127.0.0.1"
port = 11111
destination = "example"
password = "secret-in-file"
[[job.channel]]
source = "db.t"
target = "lake.db.t"
"""


def write(tmp_path: Path, text: str) -> Path:
    """``text`` as ``canalbridge.toml`` in ``tmp_path``, readable by its owner only (the loader warns about
    a password that others can read)."""
    path = tmp_path / "canalbridge.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path
