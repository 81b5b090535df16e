"""Where a restarted Canal may start again: a boundary the job took before, or it cannot say."""

from __future__ import annotations

from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.entries import BinlogWriter
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.source.canal.boundaries import SeenBoundaries

BOUNDARY = (entry_pb.EntryType.TRANSACTIONBEGIN, entry_pb.EntryType.TRANSACTIONEND)


def entries(seed: int, clock: float, **writer) -> list[entry_pb.Entry]:
    spec = WorkloadSpec(tables=standard_tables(2), row_changes=200, seed=seed)
    return list(Workload(spec, BinlogWriter(clock=lambda: clock, **writer)))


def test_a_boundary_taken_before_explains_a_restart_and_a_row_does_not():
    taken = entries(1, 1_700_000_000.0)
    seen = SeenBoundaries()
    seen.note(taken)
    ends = [e for e in taken if e.entryType in BOUNDARY]
    rows = [e for e in taken if e.entryType == entry_pb.EntryType.ROWDATA]
    assert all(seen.explains(e) for e in ends)
    assert seen.explains(rows[5]) is False  # Canal's cursor is never a row


def test_another_servers_boundary_at_a_position_taken_before_is_not_explained():
    seen = SeenBoundaries()
    seen.note(entries(1, 1_700_000_000.0))
    promoted = entries(2, 1_700_003_600.0, server_id=2)  # the same file name, other times
    assert seen.explains(promoted[0]) is False


def test_before_all_it_remembers_it_cannot_say():
    seen = SeenBoundaries(limit=10)
    assert seen.explains(entries(1, 1_700_000_000.0)[0]) is None  # (nothing taken yet)
    taken = entries(1, 1_700_000_000.0)
    seen.note(taken)
    assert seen.explains(taken[0]) is None, "forgotten, and before the oldest it keeps"
