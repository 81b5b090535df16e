"""Regenerate the protobuf modules in this package from ``proto/*.proto``.

Run as ``python -m canalbridge.protocol.generate`` (``make proto``). The test
suite calls :func:`generate` into a temporary directory and compares the
result with the checked-in modules, so they never drift from the schemas.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROTO_DIR = PACKAGE_DIR.parent.parent / "proto"
PROTO_FILES = ("CanalProtocol.proto", "EntryProtocol.proto")


def generate(out_dir: Path, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Compile the Canal schemas into ``out_dir`` and return the files written."""
    from grpc_tools import protoc  # dev/test dependency only

    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"--proto_path={proto_dir}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(str(proto_dir / name) for name in PROTO_FILES),
    ]
    status = protoc.main(args)
    if status != 0:
        raise RuntimeError(f"protoc failed with status {status} on {proto_dir}")
    return sorted(p for p in out_dir.iterdir() if p.name.endswith(("_pb2.py", "_pb2.pyi")))


def main() -> int:
    for path in generate(PACKAGE_DIR):
        print(f"wrote {path.relative_to(PACKAGE_DIR.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
