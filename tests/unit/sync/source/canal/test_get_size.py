"""How much each get asks of Canal: never a batch that holds most of the store's slots."""

from __future__ import annotations

from canalbridge.sync.settings import CommitSettings
from canalbridge.sync.source.canal.get_size import GetSize
from canalbridge.sync.source.canal.settings import CanalSettings


def job(capacity: int, mode: str, batch_size: int = 8192) -> tuple[CanalSettings, CommitSettings]:
    return (CanalSettings("127.0.0.1", 11111, "d", batch_size=batch_size),
            CommitSettings(store_capacity=capacity, store_batch_mode=mode))


def entries_handed_out(units: int, entry_bytes: int, memunit: int = 1024) -> int:
    """How many entries of one size Canal's MEMSIZE get hands out: it adds while the batch is at most the size."""
    return units * memunit // entry_bytes + 1


def test_in_itemsize_mode_a_get_asks_for_the_fetch_size_in_entries():
    size = GetSize.of(*job(4096, "ITEMSIZE"))
    assert size.next() == 1024
    size.observe(1024, 100 * 1024)
    assert size.next() == 1024


def test_in_memsize_mode_small_entries_get_a_quarter_of_the_slots_not_a_quarter_of_the_bytes():
    # A 4096-slot store of 1 KB memunits: a quarter of its bytes (1 MB) is every slot at 200 bytes an entry.
    size = GetSize.of(*job(4096, "MEMSIZE"))
    assert size.limit == 1024 and entries_handed_out(size.limit, 200) > 4096
    first = size.next()
    assert first == 1  # nothing seen yet: a small get measures the entries
    size.observe(entries_handed_out(first, 200), entries_handed_out(first, 200) * 200)
    assert entries_handed_out(size.next(), 200) <= 1024 + 1


def test_in_memsize_mode_large_entries_keep_the_byte_limit():
    size = GetSize.of(*job(4096, "MEMSIZE"))
    size.observe(10, 10 * 64 * 1024)  # 64 KB rows: a quarter of the slots is far more than a quarter of the bytes
    assert size.next() == 1024


def test_the_get_follows_the_entries_last_seen():
    size = GetSize.of(*job(16384, "MEMSIZE"))
    size.observe(100, 100 * 8 * 1024)
    assert size.next() == 4096  # the fetch size: a quarter of the store
    size.observe(4000, 4000 * 100)  # then narrow rows: the next get takes a quarter of the slots
    assert entries_handed_out(size.next(), 100) <= 4096 + 1
    size.observe(0, 0)  # an empty batch says nothing of the entries
    assert entries_handed_out(size.next(), 100) <= 4096 + 1
