"""How much the next ``getWithoutAck`` asks of Canal, so that no batch holds more than a share of the store.

Canal frees a batch only whole, so the entries of the last batch taken stay
in its store until the Consumer commits past that batch's end. A batch that
holds most of the store's slots and ends inside a source transaction leaves
the parser no room to hand over that transaction's end: it must be split.

In ``ITEMSIZE`` mode a get counts entries, and :meth:`CanalSettings.fetch_size`
is already at most a quarter of the store. In ``MEMSIZE`` mode (Canal's
shipped default) a get counts memunits of serialized entry bytes, and a
quarter of the store's bytes can hold every slot when entries are small (a
4096-slot store of 1 KB memunits hands out 1 MB a get: 4096 entries of
250 bytes). So the get is sized from the entries seen last: as many memunits
as a quarter of the slots takes at the last batch's mean entry size.
"""

from __future__ import annotations

from canalbridge.sync.settings import CommitSettings
from canalbridge.sync.source.canal.settings import CanalSettings

FIRST_GET_UNITS = 1  # before any entry was seen: a get of one memunit measures them


class GetSize:
    """The size of each get: :meth:`CanalSettings.fetch_size`, and in ``MEMSIZE`` mode also a share of the slots.

    Owned by the Receiver's thread (the link calls :meth:`next` before each
    get and :meth:`observe` after it), so it needs no lock.
    """

    def __init__(self, limit: int, *, entries: int | None = None, memunit: int = 1) -> None:
        self.limit = limit  # in the store's unit
        self.entries = entries  # MEMSIZE: at most this many entries a get; None: the size counts entries
        self.memunit = memunit
        self._entry_bytes: float | None = None

    @classmethod
    def of(cls, canal: CanalSettings, commit: CommitSettings) -> GetSize:
        """The get size of a job that reads Canal over TCP."""
        limit = canal.fetch_size(commit)
        if commit.store_batch_mode != "MEMSIZE":
            return cls(limit)
        return cls(limit, entries=commit.store_share, memunit=commit.store_memunit)

    def next(self) -> int:
        """The size to ask for, in the store's unit."""
        if self.entries is None:
            return self.limit
        if self._entry_bytes is None:
            return min(self.limit, FIRST_GET_UNITS)
        # Canal adds entries while the batch is at most this many bytes: one entry more than fits.
        units = int(self.entries * self._entry_bytes) // self.memunit
        return max(1, min(self.limit, units))

    def observe(self, entries: int, raw_size: int) -> None:
        """A get handed out ``entries`` entries of ``raw_size`` serialized bytes in all."""
        if entries > 0:
            self._entry_bytes = raw_size / entries
