"""The dev server's ring buffer behaves like Canal's MemoryEventStoreWithBuffer."""

import threading

import pytest

from canalbridge.devkit.store import BatchMode, EventStore, StoredEvent
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition


def event(offset: int, entry_type: int = entry_pb.EntryType.ROWDATA, size: int = 10) -> StoredEvent:
    return StoredEvent(
        raw=b"x" * size,
        entry_type=entry_type,
        event_type=entry_pb.EventType.INSERT,
        position=EntryPosition("mysql-bin.000001", offset),
    )


def offsets(result):
    return [e.position.offset for e in result.events]


def test_capacity_must_be_power_of_two():
    with pytest.raises(ValueError, match="power of 2"):
        EventStore(capacity=1000)


def test_get_hands_out_in_order_and_rollback_replays_from_ack():
    store = EventStore(capacity=8)
    assert store.try_put([event(i) for i in range(6)])
    first = store.get(2, wait_s=0)
    second = store.get(2, wait_s=0)
    assert offsets(first) == [0, 1] and offsets(second) == [2, 3]
    store.ack(first.end_sequence)
    store.rollback()
    assert offsets(store.get(10, wait_s=0)) == [2, 3, 4, 5]


def test_put_reports_full_when_capacity_is_unacked():
    store = EventStore(capacity=4)
    assert store.try_put([event(i) for i in range(4)])
    assert not store.try_put([event(4)])
    taken = store.get(4, wait_s=0)
    # Got but not acked still occupies the ring: Canal frees slots only on ack.
    assert not store.try_put([event(4)])
    store.ack(taken.end_sequence)
    assert store.try_put([event(4)])
    assert store.cursors().unacked_events == 1


def test_blocked_put_resumes_when_ack_frees_room():
    store = EventStore(capacity=2)
    store.try_put([event(0), event(1)])
    done = threading.Event()

    def producer():
        store.put([event(2)])
        done.set()

    thread = threading.Thread(target=producer)
    thread.start()
    assert not done.wait(0.2)
    store.ack(store.get(2, wait_s=0).end_sequence)
    assert done.wait(5)
    thread.join()


def test_get_waits_for_a_full_batch_then_returns_what_is_there():
    store = EventStore(capacity=8)
    store.try_put([event(0)])
    result = store.get(4, wait_s=0.05)
    assert offsets(result) == [0]


def test_get_without_wait_on_empty_store_is_empty():
    store = EventStore(capacity=8)
    assert store.get(4, wait_s=0).events == ()


def test_blocking_get_wakes_on_put():
    store = EventStore(capacity=8)
    results = []
    thread = threading.Thread(target=lambda: results.append(store.get(2, wait_s=None)))
    thread.start()
    store.try_put([event(0)])
    store.try_put([event(1)])
    thread.join(5)
    assert offsets(results[0]) == [0, 1]


def test_ack_position_is_last_transaction_boundary_in_batch():
    store = EventStore(capacity=8)
    store.try_put(
        [
            event(0, entry_pb.EntryType.TRANSACTIONBEGIN),
            event(1),
            event(2, entry_pb.EntryType.TRANSACTIONEND),
            event(3, entry_pb.EntryType.TRANSACTIONBEGIN),
            event(4),
        ]
    )
    assert store.get(5, wait_s=0).ack_position.offset == 3
    store.rollback()
    assert store.get(2, wait_s=0).ack_position.offset == 0


def test_memsize_mode_counts_batch_in_memory_units():
    store = EventStore(capacity=16, mem_unit=10, batch_mode=BatchMode.MEMSIZE)
    store.try_put([event(i, size=10) for i in range(8)])
    # budget 2 units = 20 bytes; Canal keeps adding while under budget, so 3 events.
    assert offsets(store.get(2, wait_s=0)) == [0, 1, 2]


def test_memsize_mode_caps_unacked_bytes():
    store = EventStore(capacity=16, mem_unit=10, batch_mode=BatchMode.MEMSIZE)
    assert store.try_put([event(i, size=100) for i in range(2)])  # 200 bytes > 160
    assert not store.try_put([event(2, size=1)])


def test_ack_outside_got_range_is_refused():
    store = EventStore(capacity=8)
    store.try_put([event(0), event(1)])
    store.get(1, wait_s=0)
    with pytest.raises(ValueError):
        store.ack(1)


def test_close_wakes_waiters():
    from canalbridge.devkit.store import StoreClosed

    store = EventStore(capacity=8)
    errors = []

    def waiter():
        try:
            store.get(1, wait_s=None)
        except StoreClosed as exc:
            errors.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    store.close()
    thread.join(5)
    assert not thread.is_alive() and errors
