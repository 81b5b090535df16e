"""What a job's Consumer and Receiver count, for status and metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class ConsumerStats:
    """Counters for status and metrics; written by the Consumer thread only (they outlive a run)."""

    transactions: int = 0
    commits: int = 0
    rollbacks: int = 0
    entries: int = 0
    rows_routed: int = 0
    chunks_routed: int = 0  # snapshot chunks handed to channels
    skipped: int = 0
    ddl: int = 0
    split_source_txns: int = 0
    went_back: int = 0  # times Canal sent entries again in the same stream (a lost MySQL connection)
    filled_in: int = 0  # entries Canal's first pass missed, applied behind a commit
    retries: int = 0
    batches: int = 0
    last_commit_time_ms: int | None = None
    last_commit_seconds: float = 0.0

    def landed(self, seconds: float) -> None:
        """A commit landed on every channel after ``seconds``."""
        self.commits += 1
        self.last_commit_time_ms = int(time.time() * 1000)
        self.last_commit_seconds = seconds


@dataclass
class ReceiverStats:
    """Counters of a job's Receiver, for metrics; written by the Receiver thread only (they outlive a run)."""

    connections_lost: int = 0  # times the source's connection failed mid-conversation (then it reconnects)
