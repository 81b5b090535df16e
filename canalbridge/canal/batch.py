"""What one ``getWithoutAck`` returns."""

from __future__ import annotations

from dataclasses import dataclass

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

EMPTY_BATCH_ID = -1  # Canal's id for "no data": never acked, never rolled back


@dataclass(frozen=True)
class CanalBatch:
    """A batch of entries under one batch id, as the server handed it out.

    ``raw_size`` is the number of serialized entry bytes, the figure the
    commit thresholds (``min_bytes``/``max_bytes``) are measured in.
    """

    batch_id: int
    entries: tuple[entry_pb.Entry, ...]
    raw_size: int

    @property
    def is_empty(self) -> bool:
        return self.batch_id == EMPTY_BATCH_ID or not self.entries
