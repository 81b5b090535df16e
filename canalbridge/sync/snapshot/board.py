"""Each table's snapshot as one run of the snapshot stands: its status, which ``status`` and the metrics read from
other threads, and the tables the run gave up on: *gone* (dropped) or *parked* (its snapshot cannot go on),
with the cause and what to do."""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from canalbridge.sync.errors import SnapshotError
from canalbridge.sync.snapshot.progress import SnapshotStatus

log = structlog.get_logger("canalbridge.snapshot")

WAITING = SnapshotStatus("waiting")


class TableBoard:
    """The tables of one snapshot run of job ``job``, by ``schema.table``. Written by the run's thread only; each
    change replaces the map whole, so a reader on another thread sees one state or the next."""

    def __init__(self, job: str, names: Iterable[str]) -> None:
        self.job = job
        self._status: dict[str, SnapshotStatus] = {name: WAITING for name in names}
        self._given_up: set[str] = set()  # parked or gone
        self._last_read_error: tuple[str, str] | None = None  # the last table parked for a read, and the words
        self._log = log.bind(job=job)

    def status(self) -> dict[str, SnapshotStatus]:
        """Each table's status as it stands."""
        return dict(self._status)

    def __getitem__(self, name: str) -> SnapshotStatus:
        return self._status.get(name, WAITING)

    def set(self, name: str, status: SnapshotStatus) -> None:
        self._status = {**self._status, name: status}

    def add(self, names: Iterable[str]) -> None:
        """Tables found meanwhile: waiting for their turn."""
        self._status = {**self._status, **{name: WAITING for name in names}}

    def given_up(self, name: str) -> bool:
        """Whether the run parked the table, or found it gone."""
        return name in self._given_up

    def gone(self, name: str, reason: str) -> None:
        """The table was dropped (or renamed away, the job not following): its rows went with it."""
        self._given_up.add(name)
        self.set(name, SnapshotStatus("gone"))
        self._log.warning("snapshot.table_gone", table=name, error=reason)

    def park(self, name: str, cause: str, *, done: str | None, rebuild: bool = False, backfill: bool = False,
             read_error: str | None = None) -> None:
        """Leave the table's snapshot where it is (through key ``done``), saying why (``cause``) and what to do.

        ``rebuild``: its target waits to be made anew (its changes wait for it). ``backfill``: the cause is a
        back-fill's condition, which the user runs again. ``read_error``: the reader's own words, for a read
        that failed; a read of a second table that fails in the same words is not one table's fault, and
        raises :class:`SnapshotError` (the job pauses)."""
        if read_error is not None and self._last_read_error is not None and read_error == self._last_read_error[1]:
            raise SnapshotError(name, f"{cause}; the read of {self._last_read_error[0]} failed the same way, so it "
                                      "is not one table's")
        if read_error is not None:
            self._last_read_error = (name, read_error)
        self._given_up.add(name)
        job = self.job
        if rebuild:
            stream = "its changes wait for its target to be made anew"
            way = "fix the cause, then pause and resume the job (the rebuild begins again), or take its channel out"
        else:
            stream = "its changes stream on"
            again = (f"run its back-fill again (canalbridge snapshot {job} {name} --where ...)" if backfill
                     else f"re-sync it (canalbridge snapshot {job} {name})")
            way = (f"fix the cause, then {again}, or cancel its snapshot (canalbridge snapshot --cancel {job}), or "
                   "take its channel out of the config")
        self.set(name, SnapshotStatus("parked", done=done, error=f"{cause}; {stream}. To go on: {way}"))
        self._log.error("snapshot.table_parked", table=name, error=cause, rebuild=rebuild)

    def parked(self) -> list[str]:
        """The tables parked in this run, in the order they came."""
        return [name for name, status in self._status.items() if status.phase == "parked"]

    def only_error(self, name: str) -> SnapshotError:
        """What pauses a job in ``mode = "only"`` that parked ``name``: it would end FINISHED without it."""
        cause = (self[name].error or "").split("; ")[0]
        return SnapshotError(name, f"{cause}; mode = \"only\" ends the job once every table's snapshot is done, so "
                                   "it pauses: fix the cause and resume it, or take the table's channel out of the "
                                   "config")
