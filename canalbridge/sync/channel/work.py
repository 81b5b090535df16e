"""What a channel's two threads hand each other: sealed transactions and read-back requests, and the queue take
that a stopping job ends; and what a commit ends as, staged writes among them."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from canalbridge.sync.channel.sink import SealedTransaction, StagedWrite
from canalbridge.sync.model.changes import Alteration
from canalbridge.sync.model.position import Position
from canalbridge.sync.schema.rows import ColumnsHistory
from canalbridge.sync.worker import STOP_CHECK_S

Q = TypeVar("Q")


@dataclass(frozen=True)
class Rows:
    """Rows of a transaction sealed before a DDL or rows of another layout (``last`` their last position), or
    at its end (``last`` None)."""

    sealed: SealedTransaction
    last: Position | None


Step = Rows | Alteration


@dataclass(frozen=True)
class Staged:
    """A channel's commit written and stamped but not current (``[job.cuts] atomic``): the job's catalog commit
    publishes it with every other channel's."""

    write: StagedWrite
    position: Position  # its stamp
    label: str
    rows: int


# How a channel's commit ended: rows written (True), none (False), or staged for the job's catalog commit.
Committed = bool | Staged


@dataclass(frozen=True)
class Published:
    """The job's catalog commit made ``staged`` current."""

    staged: Staged


@dataclass(frozen=True)
class Apply:
    """A sealed transaction: its steps in stream order, and what its tables' rows looked like (to name a row
    that no longer fits)."""

    steps: tuple[Step, ...]
    label: str
    rows: int
    end_position: Position
    result: Future[Committed]
    histories: tuple[ColumnsHistory, ...]


@dataclass(frozen=True)
class ReadBack:
    """What a target says after a commit that reported failure: its position (never behind what the channel
    knew), and the label of the transaction whose snapshot carries it."""

    position: Position | None
    label: str | None


@dataclass(frozen=True)
class ReadPosition:
    """A request to read the target back, from the transaction ``label`` (named if the read fails)."""

    label: str
    result: Future[ReadBack]


def take(work: queue.Queue[Q], stop: threading.Event) -> Q | None:
    """The next item of ``work``, or None once the job stops (what is still queued is dropped: it is
    uncommitted and will be consumed again)."""
    while not stop.is_set():
        try:
            item = work.get(timeout=STOP_CHECK_S)
        except queue.Empty:
            continue
        if not stop.is_set():
            return item
        drop(item)
    return None


def drop(item: object) -> None:
    """Let go of an item the job stopped before handling: a sealed transaction's staged rows go."""
    if isinstance(item, Apply):
        for step in item.steps:
            discard(step, "job stopping")


def discard(step: Step, reason: str) -> None:
    if isinstance(step, Rows):
        step.sealed.discard(reason)
