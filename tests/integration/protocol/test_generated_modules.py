"""The checked-in *_pb2 modules are exactly what `make proto` produces from proto/."""

from pathlib import Path

from canalbridge.protocol.generate import PACKAGE_DIR, generate


def test_checked_in_modules_match_regeneration(tmp_path: Path):
    fresh = generate(tmp_path)
    assert [p.name for p in fresh] == [
        "CanalProtocol_pb2.py",
        "CanalProtocol_pb2.pyi",
        "EntryProtocol_pb2.py",
        "EntryProtocol_pb2.pyi",
    ]
    for path in fresh:
        checked_in = PACKAGE_DIR / path.name
        assert checked_in.read_text() == path.read_text(), (
            f"{checked_in} differs from what proto/ generates: run `make proto`"
        )
