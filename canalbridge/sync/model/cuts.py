"""A consistent cut across a job's targets, as the Consumer finds it and as the cut log holds it
(:mod:`canalbridge.sync.job.cuts` publishes them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from canalbridge.sync.model.position import Position


@dataclass(frozen=True)
class Cut:
    """A cut every channel of the job committed, splitting no source transaction: ``targets`` maps each target
    the job has written to the labels of its channels' newest commits (its snapshot of the cut is the newest in
    main's lineage that one of them stamped)."""

    label: str
    position: Position
    targets: Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class PublishedCut:
    """A cut as the log holds it: its number in the job's log, the tag every target carries at its snapshot of
    the cut, and those snapshots."""

    seq: int
    tag: str
    label: str
    position: str
    snapshots: Mapping[str, int]  # target -> snapshot id
    published_ms: int
    log_table: str

    def to_dict(self) -> dict[str, object]:
        """As ``status --json`` shows it."""
        return {"seq": self.seq, "tag": self.tag, "label": self.label, "position": self.position,
                "snapshots": dict(self.snapshots), "published_ms": self.published_ms, "log_table": self.log_table}
