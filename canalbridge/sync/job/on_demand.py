"""The snapshots and verifies a user asks of a running job (``canalbridge snapshot`` and ``verify``): which
channels the named tables go to (a channel named for the table, or the one a pattern makes for it), what refuses
one, and cancelling the one that runs. The job owns its lock, its state and its run; this only asks for them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Literal

import structlog

from canalbridge.source_db import check_filter, checked_filter
from canalbridge.sync.errors import JobStateError
from canalbridge.sync.job.run import JobRun
from canalbridge.sync.model.record import JobState
from canalbridge.sync.settings import JobSettings
from canalbridge.sync.snapshot.discovery import RoutedTable
from canalbridge.sync.snapshot.runner import SnapshotRunner, SnapshotTable
from canalbridge.sync.snapshot.source import SnapshotSource
from canalbridge.sync.snapshot.verify import VerifyRunner, VerifyTable

log = structlog.get_logger("canalbridge.job")


class OnDemand:
    """A job's snapshots and verifies asked for while it streams. ``run`` gives the job's run and ``state`` its
    state; both are read under ``lock``, the job's own."""

    def __init__(self, settings: JobSettings, source: SnapshotSource | None, lock: threading.RLock,
                 run: Callable[[], JobRun | None], state: Callable[[], JobState]) -> None:
        self.name = settings.name
        self._settings = settings
        self._source = source
        self._lock = lock
        self._current_run = run
        self._state = state
        self._log = log.bind(job=self.name)

    def snapshot(self, tables: Sequence[str] = (), where: str | None = None) -> dict[str, str]:
        """A new snapshot of ``tables`` (``schema.table``: a channel's, or one a pattern takes; none named: every
        table of a channel named for one) while the job streams: a re-sync, or with ``where`` a back-fill of the
        rows that condition takes. Returns each table, as the source spells it, and the source of the channel
        whose status shows its snapshot (a merged target's shards show as its channel). Refused while a
        snapshot runs; the filter is checked by the source first."""
        condition = None if where is None else checked_filter(where)
        chosen = self._chosen(tables)  # (refused first if none may start: the source is asked nothing then)
        # The name each table goes by in the source now (a channel that followed a RENAME reads its new name).
        run = self._run()
        current = {each.name: run.followed_name(each.channel.source) for each in chosen}
        if condition is not None:
            assert self._source is not None
            # Outside the lock: the source may take its time, and a pause or a stop must not wait for it.
            with self._source.connect() as db:
                for each in chosen:
                    check_filter(db, *(current[each.name] or (each.schema, each.table)), condition)
        with self._lock:
            self._run().start_snapshot([
                SnapshotTable(each.schema, each.table, each.channel.key, None, condition,
                              each.channel if each.channel.rule is not None else None, current=current[each.name])
                for each in chosen])
        self._log.info("job.snapshot_started", tables=[each.name for each in chosen], where=condition)
        return {each.name: each.channel.source for each in chosen}

    def verify(self, tables: Sequence[str] = ()) -> tuple[str, tuple[str, ...]]:
        """Compare the targets of ``tables`` (``schema.table``: a channel's, or one a pattern takes; none named:
        every upsert channel named for one table) with their source while the job streams
        (:mod:`canalbridge.sync.snapshot.verify`). Returns the verify's id and its tables; the job's record
        shows each one's check."""
        chosen = self._chosen(tables)
        if not tables:
            chosen = [c for c in chosen if not c.channel.keeps_every_change and not c.channel.shaped
                      and not c.channel.soft_deletes]
        changelogs = [c.name for c in chosen if c.channel.keeps_every_change]
        if changelogs or not chosen:
            raise JobStateError(f"job {self.name}: verify compares upsert targets, one row per key; "
                                + (f"{', '.join(changelogs)} writes a changelog" if changelogs
                                   else "the job has no upsert channel named for one table that leaves its rows "
                                        "unshaped"))
        mapped = [c.name for c in chosen if c.channel.columns is not None]
        if mapped:
            raise JobStateError(f"job {self.name}: verify compares columns by name, and the channel of "
                                f"{', '.join(mapped)} maps them by position (its columns setting)")
        shaped = [c.name for c in chosen if c.channel.shaped or c.channel.soft_deletes]
        if shaped:
            raise JobStateError(f"job {self.name}: verify compares a target with its source row for row, and the "
                                f"channel of {', '.join(shaped)} shapes its rows (exclude, mask, computed, "
                                f"row_filter or soft deletes)")
        merged = [c.name for c in chosen if c.channel.merged]
        if merged:
            raise JobStateError(f"job {self.name}: verify compares a target with one table, and "
                                f"{', '.join(merged)} shares its target with the other tables its pattern merges")
        with self._lock:
            run = self._run()
            if self._source is None or self._source.comparer is None:
                raise JobStateError(f"job {self.name}: verify compares targets through Spark, which this job's "
                                    "sinks do not use")
            runner = run.start_verify([VerifyTable(c.schema, c.table, c.channel.target, c.channel.key,
                                                   c.channel if c.channel.rule is not None else None)
                                       for c in chosen])
        names = tuple(c.name for c in chosen)
        self._log.info("job.verify_started", tables=list(names), verify=runner.verify_id)
        return runner.verify_id, names

    def cancel(self, what: Literal["snapshot", "verify"]) -> tuple[str, ...]:
        """Cancel the snapshot or the verify that runs (see the runners' ``cancel``); returns its tables. With
        no snapshot running, the snapshot of each table parked in this run is cancelled: a mark says it is
        done."""
        with self._lock:
            run = self._current_run() if self._state() is JobState.RUNNING else None
            runner = None if run is None else run.snapshot if what == "snapshot" else run.verify
            if isinstance(runner, SnapshotRunner) and not runner.running and run is not None:
                parked = [table for table in runner.parked() if not table.rebuild]
                busy = run.windows_busy()
                if parked and busy is not None:
                    raise JobStateError(f"job {self.name}: {busy}")
                if parked:
                    run.cancel_parked(parked)
                    self._log.warning("job.snapshot_cancel", tables=[t.name for t in parked], parked=True)
                    return tuple(t.name for t in parked)
            if runner is None or not runner.running:
                raise JobStateError(f"job {self.name} runs no {what}")
            runner.cancel()
            tables = tuple(t.name for t in runner.tables)
            which = {"verify": runner.verify_id} if isinstance(runner, VerifyRunner) else {}
            self._log.warning(f"job.{what}_cancel", tables=list(tables), **which)
            return tables

    def _chosen(self, tables: Sequence[str]) -> list[RoutedTable]:
        """Each of ``tables`` (``schema.table``, without case, once each) with the channel it goes to: a channel
        named for it, else the one a pattern makes for it, as the source spells the table (none named: every
        channel named for one table). :class:`KeyError` naming those neither takes; :class:`JobStateError` if
        no snapshot or verify may start now."""
        run = self._run()
        named = {c.source.lower(): c for c in self._settings.channels if c.pattern is None}
        if not tables:
            return [RoutedTable.of(c) for c in named.values()]
        wanted = list(dict.fromkeys(t.lower() for t in tables))
        found: dict[str, RoutedTable] = {}
        if self._settings.has_rules and any(t not in named for t in wanted):
            assert self._source is not None
            with self._source.connect() as db:  # (outside the lock, as a filter's check)
                found = {t.name.lower(): t for t in run.pattern_tables(db)}
        unknown = [repr(t) for t in tables if t.lower() not in named and t.lower() not in found]
        if unknown:
            patterns = "; nor does any of its patterns take such a table of the source" if self._settings.has_rules \
                else ""
            raise KeyError(f"job {self.name} has no channel named for {', '.join(unknown)} (its tables: "
                           f"{', '.join(sorted(c.source for c in named.values())) or 'none'}){patterns}")
        return [RoutedTable.of(named[t]) if t in named else found[t] for t in wanted]

    def _run(self) -> JobRun:
        """The run a new snapshot or verify starts in; :class:`JobStateError` if none may."""
        with self._lock:
            if self._source is None:
                snapshot = self._settings.snapshot
                how = ("its [job.snapshot] says mode = \"never\"" if snapshot is not None
                       else "it has no [job.snapshot]")
                raise JobStateError(f"job {self.name} takes no snapshot and runs no verify: {how}")
            run = self._current_run()
            state = self._state()
            if state is not JobState.RUNNING or run is None:
                raise JobStateError(f"job {self.name} is {state.value}: a snapshot runs while the job runs")
            refusal = run.snapshot_refusal()
            if refusal is not None:
                raise JobStateError(f"job {self.name}: {refusal}")
            busy = run.windows_busy()
            if busy is not None:
                raise JobStateError(f"job {self.name}: {busy}")
            return run
