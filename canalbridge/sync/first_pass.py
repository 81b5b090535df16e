"""Finding what Canal's first pass missed, when it sends part of the binlog again.

When Canal's MySQL connection breaks inside a transaction, Canal dumps the
binlog again from the last transaction end it had put and sends everything
after it a second time. Its first pass can have a gap there: a chunk whose
put into a full store was interrupted, which only the second pass has (README
"Limits"). If the Consumer committed past that gap (a source transaction
split for a full store), the second pass brings entries at or before a
channel's committed position that were never applied; skipping them as
"already committed" would lose them.

:class:`RoutedSinceEnd` remembers every position routed since the last
transaction end (Canal never goes back further than that end), so that an
entry sent again can be told apart from one the first pass never had.
"""

from __future__ import annotations

import bisect

from canalbridge.sync.position import EntryPosition

_Key = tuple[tuple[str, int, str], int]


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

    def missed(self, position: EntryPosition, *, transaction_end: bool) -> bool:
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

    def fill(self, position: EntryPosition, channel: str | None) -> None:
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
