"""Batch ids and ack order, as Canal's MemoryMetaManager keeps them."""

import pytest

from canalbridge.devkit.meta import BatchRange, ClientMeta, MetaError


def test_batch_ids_start_at_one_and_grow():
    meta = ClientMeta("example", "1001")
    assert [meta.add_batch(BatchRange(i)) for i in range(3)] == [1, 2, 3]
    meta.clear_batches()
    assert meta.add_batch(BatchRange(9)) == 4


def test_only_the_oldest_batch_may_be_removed():
    meta = ClientMeta("example", "1001")
    first = meta.add_batch(BatchRange(1))
    second = meta.add_batch(BatchRange(2))
    with pytest.raises(MetaError, match=f"batchId:{second} is not the firstly:{first}"):
        meta.remove_batch(second)
    assert meta.remove_batch(first) == BatchRange(1)
    assert meta.remove_batch(first) is None
    assert meta.outstanding() == [second]
