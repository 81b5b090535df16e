"""Finding what Canal's first pass missed, when it sends part of the binlog again.

When Canal's MySQL connection breaks inside a transaction, Canal dumps the
binlog again from the last transaction end it had put and sends everything
after it a second time. Its first pass can have a gap there: a chunk whose
put into a full store was interrupted, which only the second pass has
(docs/guide/limits.md#first-pass-gap). If the Consumer committed past that gap (a source transaction
split for a full store), the second pass brings entries at or before a
channel's committed position that were never applied; skipping them as
"already committed" would lose them.

:class:`RoutedSinceEnd` remembers every position routed since the last
transaction end (Canal never goes back further than that end), so that an
entry sent again can be told apart from one the first pass never had.
:class:`SecondPass` holds all the Consumer must remember across such a
replay: which entries of the first pass to skip, and which channels apply
entries again behind their commit.

A commit that applies entries behind its table's position is stamped with
where it really reached (:class:`Refill`), so that a daemon stopped in the
middle goes on with it after a restart, when this memory is gone.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

import structlog

from canalbridge.sync.model.position import Position, Refill, journal_key

_Key = tuple[Any, ...]  # a position's sort_key


class RoutedSinceEnd:
    """Positions routed since the last transaction end, to find entries a first pass missed.

    Owned by the Consumer thread. Positions are kept in binlog order, so a
    lookup costs a bisection; the common case, an entry past all before it,
    costs one comparison. Memory is bounded by the entries of one source
    transaction.
    """

    def __init__(self) -> None:
        self._keys: list[_Key] = []  # sorted; the first is the last transaction end routed
        self._filled: dict[str, list[_Key]] = {}  # per channel: missed entries it applies, not yet committed

    def missed(self, position: Position, *, transaction_end: bool) -> bool:
        """Note ``position`` as sent; True if it lies among positions routed before and was not one.

        Such an entry is one that Canal's first pass did not send. It counts
        as routed once :meth:`fill` names a channel that commits it, or at
        once if :meth:`fill` names none.
        """
        keys = self._keys
        key = position.sort_key
        if not keys or key > keys[-1]:
            if transaction_end:
                # Canal goes back to the last transaction end it put, never further.
                self._keys = [key]
            else:
                keys.append(key)
            return False
        if key <= keys[0]:
            return False  # from before the window: routed or acked long ago
        return keys[bisect.bisect_left(keys, key)] != key

    @property
    def last(self) -> _Key | None:
        """The sort key of the latest position routed since the last transaction end (that end, if none since)."""
        return self._keys[-1] if self._keys else None

    def routed_in_order(self, journal: str, offsets: list[int], last_end: int | None) -> None:
        """Entries of binlog file ``journal`` at ``offsets``, past every position noted, were routed in order;
        the one at ``last_end`` (an index in ``offsets``) is the last transaction end among them."""
        in_file = journal_key(journal)
        if last_end is not None:
            self._keys = list(zip(itertools.repeat(in_file), offsets[last_end:]))
        else:
            self._keys.extend(zip(itertools.repeat(in_file), offsets))

    def fill(self, position: Position, channel: str | None) -> None:
        """A missed entry is applied now: by ``channel``'s open transaction, or by none."""
        if channel is None:
            self._insert(position.sort_key)
        else:
            self._filled.setdefault(channel, []).append(position.sort_key)

    def committed(self, channel: str) -> None:
        """``channel`` committed: the missed entries it applied count as routed."""
        for key in self._filled.pop(channel, ()):
            self._insert(key)

    def aborted(self, unsettled: set[str]) -> None:
        """The open transaction was dropped: what it filled in is missing again.

        Except for the ``unsettled`` channels, whose commit failed but may
        have landed: :meth:`committed` or :meth:`lost` once that is known.
        """
        self._filled = {channel: keys for channel, keys in self._filled.items() if channel in unsettled}

    def lost(self, channel: str) -> None:
        """``channel``'s failed commit did not land: what it filled in is missing again."""
        self._filled.pop(channel, None)

    def _insert(self, key: _Key) -> None:
        if self._keys and key > self._keys[0]:  # (a later transaction end may have moved the window on)
            bisect.insort(self._keys, key)


@dataclass
class _Superseded:
    """Canal's first pass, which its second pass replaces: ``left`` entries from ``start`` on, in ``epoch``."""

    epoch: int
    start: Position
    left: int


class SecondPass:
    """The Consumer's memory of a stream that went back; owned by the Consumer thread.

    When the stream goes back, the Consumer rolls Canal back, and the replay
    brings again, in order, the entries of the first pass at or after the
    position it went back to: :meth:`first_pass_entry` skips exactly those.
    An entry the first pass missed (:meth:`missed`) is applied even behind a
    channel's commit (:meth:`applies_again`): a changelog channel applies it
    alone, an upsert channel it and everything after it through what it had
    committed, so that the last change per key wins again.
    """

    def __init__(self, log: structlog.typing.FilteringBoundLogger) -> None:
        self._log = log
        self._routed = RoutedSinceEnd()
        self._superseded: _Superseded | None = None
        # Upsert channels applying again, in order, everything through the position they had
        # committed, because their first pass missed an entry before it.
        self._refilling: dict[str, Position] = {}
        # Changelog channels going on, after a restart, with a refill that an earlier process stopped in.
        self._resumed: dict[str, Refill] = {}
        self._filled_here = 0  # missed entries the open transaction applies
        self.filled_in = 0  # missed entries applied behind a commit, ever (for stats)

    # -- going back --------------------------------------------------------------------

    def went_back(self, position: Position, epoch: int, again: int) -> None:
        """The replay in ``epoch`` sends ``again`` entries of the first pass from ``position`` on."""
        if again:
            self._superseded = _Superseded(epoch, position, again)

    def new_epoch(self, epoch: int) -> None:
        if self._superseded is not None and self._superseded.epoch != epoch:
            self._superseded = None  # that replay ended early: a new go-back is detected afresh

    def first_pass_entry(self, position: Position) -> bool:
        """Whether ``position`` is an entry of the first pass that the second pass sends again."""
        skip = self._superseded
        if skip is None or position < skip.start:
            return False
        skip.left -= 1
        if not skip.left:
            self._superseded = None
            self._log.info("consumer.first_pass_skipped", until=str(position))
        return True

    @property
    def quiet(self) -> bool:
        """Whether no entry of a first pass is left to skip: every entry past those routed is new."""
        return self._superseded is None

    @property
    def refilling(self) -> bool:
        """Whether a channel is applying again what a first pass missed: until it is done, its target lacks
        changes that others may hold already."""
        return bool(self._refilling or self._resumed)

    @property
    def routed(self) -> RoutedSinceEnd:
        """What was routed since the last transaction end (a fast lane notes its stretches there)."""
        return self._routed

    # -- entries the first pass missed -------------------------------------------------------

    def missed(self, position: Position, *, transaction_end: bool) -> bool:
        """Note ``position`` as routed; True if the first pass missed it (see :meth:`RoutedSinceEnd.missed`)."""
        return self._routed.missed(position, transaction_end=transaction_end)

    def fill(self, position: Position, channel: str | None) -> None:
        """A missed entry is applied now, by ``channel``'s open transaction or by none."""
        self._routed.fill(position, channel)

    def resume(self, source: str, refill: Refill) -> None:
        """Channel ``source``'s target says an earlier process stopped in a refill: go on with it."""
        self._log.warning("consumer.first_pass_refill_resumed", channel=source, behind=str(refill.behind),
                          through=str(refill.through))
        if refill.held is None:
            self._refilling[source] = refill.through  # everything Canal sends through it, again, in order
        else:
            self._resumed[source] = refill

    def applies_again(self, source: str, keeps_every_change: bool, position: Position, done: Position,
                      missed: bool) -> bool:
        """Whether an entry at or before what channel ``source`` committed (``done``) must be applied."""
        through = self._refilling.get(source)
        if through is not None and position <= through:
            return True  # an upsert channel applying again, in order, what followed a missed entry
        resumed = self._resumed.get(source)
        if resumed is not None and resumed.lacks(position):
            missed = True  # one an earlier process had not filled in yet
        if not missed:
            return False
        self.filled_in += 1
        self._filled_here += 1
        if not keeps_every_change:
            # Applied again in order from the missed entry through what the table holds,
            # the last change per key wins again.
            self._refilling[source] = done
            self._log.warning("consumer.first_pass_gap_filling", channel=source, position=str(position),
                              through=str(done))
        return True

    # -- how transactions end -------------------------------------------------------------------

    def committed(self, cut: Position, failed: set[str], channels: set[str]) -> None:
        """A commit through ``cut`` ended: every channel but the ``failed`` ones committed."""
        for source in channels - failed:
            self._routed.committed(source)
        self._refilling = {
            source: through for source, through in self._refilling.items() if source in failed or through > cut
        }
        for source in set(self._resumed) - failed:
            self._advance_resumed(source, cut)
        if self._filled_here:
            self._log.warning("consumer.first_pass_gap_filled", entries=self._filled_here, position=str(cut))
            self._filled_here = 0

    def aborted(self, unsettled: set[str]) -> None:
        """The open transaction was dropped (see :meth:`RoutedSinceEnd.aborted`)."""
        self._routed.aborted(unsettled)
        self._filled_here = 0

    def settled(self, source: str, landed: bool, cut: Position | None) -> None:
        """Whether ``source``'s commit through ``cut`` that reported failure landed after all."""
        if landed:
            self._routed.committed(source)
            if cut is not None and source in self._resumed:
                self._advance_resumed(source, cut)
        else:
            self._routed.lost(source)

    def _advance_resumed(self, source: str, cut: Position) -> None:
        """The table holds everything through ``cut`` now."""
        resumed = self._resumed[source]
        if not cut < resumed.through:
            del self._resumed[source]
        elif resumed.behind < cut:
            self._resumed[source] = dataclasses.replace(resumed, behind=cut)
