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
    # Source execute times (ms) of the first change routed into the open transaction and into the commit in
    # flight: the oldest change not yet in every target is the older of the two (none: nothing waits).
    open_since_ms: int | None = None
    committing_since_ms: int | None = None

    def routed_first(self, execute_time_ms: int) -> None:
        """The open transaction's first change was routed."""
        if execute_time_ms:
            self.open_since_ms = execute_time_ms

    def handed_over(self) -> None:
        """The open transaction became the commit in flight."""
        self.committing_since_ms, self.open_since_ms = self.open_since_ms, None

    def landed(self, seconds: float) -> None:
        """A commit landed on every channel after ``seconds``."""
        self.commits += 1
        self.last_commit_time_ms = int(time.time() * 1000)
        self.last_commit_seconds = seconds
        self.committing_since_ms = None

    def waiting_since_ms(self) -> int | None:
        """The execute time of the oldest change routed and not yet in every target; None when none waits."""
        waiting = [since for since in (self.committing_since_ms, self.open_since_ms) if since is not None]
        return min(waiting) if waiting else None


@dataclass
class ReceiverStats:
    """Counters of a job's Receiver, for metrics; written by the Receiver thread only (they outlive a run)."""

    connections_lost: int = 0  # times the source's connection failed mid-conversation (then it reconnects)
    last_heard: float | None = None  # time.monotonic() of the source's last answer, an empty one too
