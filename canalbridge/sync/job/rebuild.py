"""``canalbridge rebuild``: which channel a table names, whether its target can be made anew, and the mark.

A rebuild puts one table back in line when only a new target can fix it
(a key Canal reported before its DDL, a target that no longer matches the
source, a DDL with no defined effect). The mark it leaves in the target
(:meth:`~canalbridge.sync.channel.sink.TargetReader.mark_rebuild`) does
the rest when the job runs again: the table's snapshot lands a mark in a
rebuild window first, its channel drops the table's changes until that
window's close signal and replaces the target there (the source's columns
and key as of its open signal), and the snapshot then reads every row
into it while the other channels stream on.
"""

from __future__ import annotations

from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.errors import JobStateError
from canalbridge.sync.settings import ChannelSettings, JobSettings


def channel_to_rebuild(settings: JobSettings, table: str) -> ChannelSettings:
    """The channel named for ``table`` (``schema.table``), if its target can be rebuilt: :class:`KeyError` when
    no channel is named for it, :class:`JobStateError` when the job cannot rebuild."""
    snapshot = settings.snapshot
    if snapshot is None or not snapshot.active:
        raise JobStateError(f"job {settings.name}: a rebuild reads the table again from the source, and the job has "
                            f"no snapshot to do it with: add [job.snapshot] (mode \"initial\" or \"only\")")
    named = [c for c in settings.channels if c.pattern is None and c.source.lower() == table.strip().lower()]
    if not named:
        known = ", ".join(c.source for c in settings.channels if c.pattern is None) or "none"
        raise KeyError(f"job {settings.name} has no channel named for {table!r} (tables of a pattern cannot be "
                       f"rebuilt one by one; the channels named for one table: {known})")
    return named[0]


def mark_for_rebuild(channel: ChannelSettings, sink: ChannelSink) -> None:
    """Mark ``channel``'s target to be made anew (no thread of the job may be writing it);
    :class:`JobStateError` when it cannot be."""
    state = sink.state.read_state()
    if state.source_table is not None:
        raise JobStateError(f"channel {channel.source} follows its table under the name {state.source_table}: "
                            f"rename the channel's source in the config to that name first")
    if not sink.state.mark_rebuild():
        raise JobStateError(f"target {channel.target} does not exist yet: resume the job, which makes it")
