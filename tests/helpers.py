"""Small helpers shared by the test packages."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb


def eventually(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``predicate`` every 50 ms until it holds or ``timeout_s`` passes.

    For state that has no event to wait on (a lock another process-internal
    thread holds, a counter in a job); never a stand-in for a fixed sleep.
    """
    deadline = time.monotonic() + timeout_s
    tick = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            return predicate()
        tick.wait(0.05)
    return True


def at_transaction_ends(entries: Sequence[entry_pb.Entry], parts: int) -> list[list[entry_pb.Entry]]:
    """``entries`` cut into ``parts`` runs of about equal length, each ending with a transaction's end.

    A feed cut inside a transaction leaves the job waiting for the rest of it
    until ``max_source_txn_wait_seconds``; whole transactions commit at once.
    """
    ends = [i + 1 for i, entry in enumerate(entries) if entry.entryType == entry_pb.EntryType.TRANSACTIONEND]
    cuts = sorted({next((end for end in ends if end >= len(entries) * n // parts), len(entries))
                   for n in range(1, parts)})
    bounds = [0, *cuts, len(entries)]
    runs = [list(entries[start:stop]) for start, stop in itertools.pairwise(bounds) if stop > start]
    assert len(runs) == parts, f"{len(entries)} entries with {len(ends)} transaction ends make no {parts} runs"
    return runs
