"""A file of serialized Canal entries (4-byte big-endian length + Entry), to feed a dev server fast.

Benchmarks generate a workload once, save it, and start ``canalbridge
devserver --entries FILE`` in another process, so that neither generating
entries nor serving them shares a GIL with the code being measured.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

_LENGTH = struct.Struct(">I")


def write_entries(path: Path, entries: Iterable[entry_pb.Entry]) -> int:
    """Write ``entries`` to ``path``; return how many were written."""
    count = 0
    with open(path, "wb") as out:
        for entry in entries:
            raw = entry.SerializeToString()
            out.write(_LENGTH.pack(len(raw)))
            out.write(raw)
            count += 1
    return count


def read_raw_entries(path: Path) -> Iterator[bytes]:
    """Yield the serialized entries of a file written by :func:`write_entries`."""
    with open(path, "rb") as source:
        while header := source.read(_LENGTH.size):
            if len(header) != _LENGTH.size:
                raise ValueError(f"{path}: truncated length prefix")
            (length,) = _LENGTH.unpack(header)
            raw = source.read(length)
            if len(raw) != length:
                raise ValueError(f"{path}: truncated entry of {length} bytes")
            yield raw


def read_entries(path: Path) -> Iterator[entry_pb.Entry]:
    """Yield the entries of a file written by :func:`write_entries`."""
    for raw in read_raw_entries(path):
        yield entry_pb.Entry.FromString(raw)
