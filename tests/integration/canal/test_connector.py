"""Our connector against the dev server: every operation and every failure it must report."""

from __future__ import annotations

import math
import socket
import threading
import time

import pytest

from canalbridge.canal import (
    CanalAuthError,
    CanalBatch,
    CanalConnectionError,
    CanalConnector,
    CanalServerError,
)
from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from tests.helpers import eventually
from tests.infra.replay import apply_entries

PASSWORD = "canal-secret"


def connector(server, **overrides) -> CanalConnector:
    destination = overrides.pop("destination", "example")
    options = {"username": "canal", "password": PASSWORD, "so_timeout_s": 10.0, **overrides}
    return CanalConnector("127.0.0.1", server.port, destination, **options)


def fed(server, rows=200, **spec) -> Workload:
    workload = Workload(WorkloadSpec(row_changes=rows, **spec))
    server.feed("example", workload)
    server.preload("example", timeout_s=30)  # every entry in the store, as if a client had subscribed before
    assert server.destinations["example"].wait_parsed(0)
    return workload


def offsets(batch) -> list[tuple[str, int]]:
    return [(e.header.logfileName, e.header.logfileOffset) for e in batch.entries]


def wait_acked_to(server, sequence: int) -> None:
    # Acks have no reply: observe the server's store instead.
    assert server.destinations["example"].store.wait_for(lambda c: c.ack == sequence, 10)


def test_drain_with_get_and_ack_reproduces_every_table(dev_server):
    workload = fed(dev_server, rows=500)
    tables: dict = {}
    with connector(dev_server) as client:
        client.subscribe(r".*\..*")
        client.rollback()
        while True:
            batch = client.get_without_ack(64, timeout_ms=50)
            if batch.is_empty:
                break
            entry_bytes = sum(e.ByteSize() for e in batch.entries)
            # each entry's field tag and length, and the batch id, are counted too
            assert entry_bytes < batch.raw_size <= entry_bytes + 6 * len(batch.entries) + 11
            apply_entries(tables, batch.entries)
            client.ack(batch.batch_id)
        wait_acked_to(dev_server, dev_server.cursors("example").put)
    for name, expected in workload.expected.items():
        assert tables[name] == expected.canal_rows(), name


def test_empty_get_has_batch_id_minus_one(dev_server):
    with connector(dev_server) as client:
        client.subscribe()
        assert client.get_without_ack(10).batch_id == -1
        assert client.get_without_ack(10, timeout_ms=20).is_empty


def test_several_outstanding_batches_are_acked_oldest_first(dev_server):
    fed(dev_server)
    with connector(dev_server) as client:
        client.subscribe()
        batches = [client.get_without_ack(5) for _ in range(3)]
        assert [b.batch_id for b in batches] == [1, 2, 3]
        assert dev_server.cursors("example").get == 14
        for batch in batches:
            client.ack(batch.batch_id)
        wait_acked_to(dev_server, 14)


def test_ack_out_of_order_is_refused_and_drops_the_connection(dev_server):
    fed(dev_server)
    with connector(dev_server) as client:
        client.subscribe()
        first, second = client.get_without_ack(5), client.get_without_ack(5)
        client.ack(second.batch_id)
        with pytest.raises(CanalServerError) as failure:
            client.get_without_ack(5)
        assert failure.value.code == 400
        assert f"batchId:{second.batch_id} is not the firstly:{first.batch_id}" in str(failure.value)
        assert not client.connected
    assert dev_server.cursors("example").ack == -1


def test_an_ack_a_rollback_overtook_is_answered_with_canals_error(dev_server, monkeypatch):
    # Canal does not serialise an ack with a rollback: another connection of the client (a reconnect)
    # can roll the store back after the ack took its batch out of the meta. Canal's store then finds
    # no such position and the server answers with an error; the dev server did the same, not die.
    fed(dev_server)
    destination = dev_server.destinations["example"]
    with connector(dev_server) as client:
        client.subscribe()
        batch = client.get_without_ack(5)
        meta = destination.client(client.client_id)
        remove = meta.remove_batch

        def then_rolled_back(batch_id: int):
            taken = remove(batch_id)
            destination.store.rollback()
            return taken

        monkeypatch.setattr(meta, "remove_batch", then_rolled_back)
        client.ack(batch.batch_id)
        with pytest.raises(CanalServerError, match="no match ack position") as failure:
            client.get_without_ack(5)
        assert failure.value.code == 400
    assert dev_server.cursors("example").ack == -1


def test_rollback_replays_from_ack_cursor(dev_server):
    fed(dev_server)
    with connector(dev_server) as client:
        client.subscribe()
        first = client.get_without_ack(5)
        second = client.get_without_ack(5)
        client.ack(first.batch_id)
        client.rollback()
        replayed = client.get_without_ack(5)
        assert replayed.batch_id == 3
        assert offsets(replayed) == offsets(second)


def test_rollback_of_one_batch_id_rolls_back_the_store(dev_server):
    fed(dev_server)
    with connector(dev_server) as client:
        client.subscribe()
        first = client.get_without_ack(5)
        client.get_without_ack(5)
        client.rollback(first.batch_id)
        assert offsets(client.get_without_ack(5)) == offsets(first)


def ack_one_leave_one(server) -> tuple[CanalConnector, CanalBatch]:
    """Connect, take two batches, ack the first; return the client and the un-acked batch."""
    fed(server)
    client = connector(server)
    client.connect()
    client.subscribe()
    acked = client.get_without_ack(5)
    unacked = client.get_without_ack(5)
    client.ack(acked.batch_id)
    wait_acked_to(server, 4)
    return client, unacked


def test_reconnect_keeps_ack_cursor(dev_server):
    client, unacked = ack_one_leave_one(dev_server)
    client.disconnect()

    again = connector(dev_server)
    again.connect()
    again.subscribe()
    again.rollback()
    replayed = again.get_without_ack(5)
    assert offsets(replayed) == offsets(unacked)
    assert replayed.batch_id > unacked.batch_id  # ids never restart
    again.disconnect()


def past_cursor(acked: list) -> list:
    """The acked entries a restarted Canal delivers again: from the last transaction boundary on.

    Canal's meta cursor is the start of the last TRANSACTIONBEGIN or
    TRANSACTIONEND acked (the workload has no DDL), and its parser dumps the
    binlog from there: that entry comes again, and what follows it.
    """
    for index in range(len(acked) - 1, -1, -1):
        if acked[index].entryType in (entry_pb.EntryType.TRANSACTIONBEGIN, entry_pb.EntryType.TRANSACTIONEND):
            return acked[index:]
    return acked


def drain_offsets(client, entries: int) -> list[tuple[str, int]]:
    """The next ``entries`` entries' offsets. After a restart the server's parser fills its store again while
    the client asks, so each get waits (on the server, bounded) for the entries still to come."""
    taken: list[tuple[str, int]] = []
    while len(taken) < entries:
        batch = client.get_without_ack(entries - len(taken), timeout_ms=5_000)
        assert not batch.is_empty, f"only {len(taken)} of {entries} entries came"
        taken += offsets(batch)
    return taken


@pytest.mark.parametrize("batch", [3, 5, 7])
def test_server_restart_delivers_again_from_the_acked_transaction_boundary(dev_server, batch):
    fed(dev_server, rows_per_transaction=(3, 3))
    client = connector(dev_server)
    client.connect()
    client.subscribe()
    acked = client.get_without_ack(batch)
    unacked = client.get_without_ack(5)
    client.ack(acked.batch_id)
    wait_acked_to(dev_server, batch - 1)  # store sequences count from 0
    dev_server.restart()
    with pytest.raises(CanalConnectionError):
        client.get_without_ack(5)
    client.connect()
    client.subscribe()
    again = past_cursor(list(acked.entries))
    expected = [(e.header.logfileName, e.header.logfileOffset) for e in again] + offsets(unacked)
    assert drain_offsets(client, len(expected)) == expected
    client.disconnect()


def test_server_crash_delivers_again_everything_acked_since_the_meta_flush(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD, meta_flush_period_s=math.inf))
    fed(server, rows_per_transaction=(3, 3))
    with connector(server) as client:
        client.subscribe()
        first = client.get_without_ack(6)
        client.ack(first.batch_id)
        wait_acked_to(server, 5)
    server.restart(crash=True)  # meta.dat never flushed: Canal starts over where it began
    with connector(server) as client:
        client.subscribe()
        assert drain_offsets(client, 6) == offsets(first)


def test_filter_keeps_only_subscribed_tables(dev_server):
    with connector(dev_server) as client:
        client.subscribe(r"shop\.orders")
        fed(dev_server, rows=300)
        kinds = set()
        while not (batch := client.get_without_ack(100)).is_empty:
            for entry in batch.entries:
                if entry.entryType == entry_pb.EntryType.ROWDATA:
                    kinds.add(entry.header.tableName)
            client.ack(batch.batch_id)
    assert kinds == {"orders"}


def test_full_store_holds_the_source_back_until_acks(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example", capacity=16))
    workload = Workload(WorkloadSpec(row_changes=300))
    server.feed("example", workload)
    with connector(server, username="", password="") as client:
        client.subscribe()
        assert server.destinations["example"].store.wait_for(lambda c: c.put - c.ack >= 9, 10)
        batch = client.get_without_ack(16)
        # Nothing acked yet: the parser cannot have put more than the capacity.
        assert server.cursors("example").put - server.cursors("example").ack <= 16
        tables: dict = {}
        while not batch.is_empty or not server.is_drained("example"):
            apply_entries(tables, batch.entries)
            client.ack(batch.batch_id)
            batch = client.get_without_ack(16, timeout_ms=20)
    for name, expected in workload.expected.items():
        assert tables.get(name, {}) == expected.canal_rows()


def test_preloading_a_source_larger_than_the_store_is_refused_naming_the_destination(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example", capacity=16))
    server.feed("example", Workload(WorkloadSpec(row_changes=300)))
    with pytest.raises(ValueError, match=r"destination example: its store \(capacity 16\) is full"):
        server.preload("example", timeout_s=30)


def test_wrong_password_is_a_clear_auth_error_without_the_password(dev_server):
    client = connector(dev_server, password="not-the-password")
    with pytest.raises(CanalAuthError) as failure:
        client.connect()
    message = str(failure.value)
    assert "authentication failed for user 'canal'" in message
    assert f"127.0.0.1:{dev_server.port}" in message
    assert "not-the-password" not in message and "not-the-password" not in repr(client)
    assert not client.connected


def test_missing_password_is_refused_when_the_server_has_one(dev_server):
    with pytest.raises(CanalAuthError):
        connector(dev_server, password="").connect()


def test_server_without_password_accepts_any_client(dev_server_factory):
    server = dev_server_factory(DestinationConfig("open"))
    with CanalConnector("127.0.0.1", server.port, "open") as client:
        client.subscribe()
        assert client.get_without_ack(1).is_empty


def test_unknown_destination_is_a_server_error(dev_server):
    with connector(dev_server) as client:
        client.destination = "nope"
        with pytest.raises(CanalServerError, match="destination:nope should start first"):
            client.subscribe()


def test_get_before_subscribe_is_refused(dev_server_factory):
    server = dev_server_factory()
    with connector(server) as client:
        client.client_id = "2002"
        with pytest.raises(CanalServerError, match="should subscribe first"):
            client.get_without_ack(1)


def test_connection_refused_names_the_address():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = CanalConnector("127.0.0.1", port, "example", connect_timeout_s=2)
    with pytest.raises(CanalConnectionError, match=f"127.0.0.1:{port}.*cannot connect"):
        client.connect()


def test_server_going_away_mid_get_is_a_connection_error_not_a_hang(dev_server):
    fed(dev_server, rows=5)
    errors: list[Exception] = []
    with connector(dev_server) as client:
        client.subscribe()

        def long_get():
            try:
                client.get_without_ack(10_000, timeout_ms=60_000)
            except CanalConnectionError as exc:
                errors.append(exc)

        started = time.monotonic()
        getter = threading.Thread(target=long_get)
        getter.start()
        dev_server.stop()
        getter.join(30)
        assert not getter.is_alive()
    assert errors and "connection lost" in str(errors[0])
    assert time.monotonic() - started < 30


def test_silent_server_times_out_on_handshake():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = CanalConnector("127.0.0.1", listener.getsockname()[1], "example", so_timeout_s=0.3)
        with pytest.raises(CanalConnectionError, match="handshake: no reply within"):
            client.connect()


def test_idle_timeout_asked_in_auth_makes_the_server_close(dev_server):
    client = connector(dev_server, idle_timeout_ms=100)
    client.connect()
    assert dev_server.wait_sessions(1, 5)
    assert dev_server.wait_sessions(0, 10)  # the server closed the idle connection
    with pytest.raises(CanalConnectionError):
        client.subscribe()


def test_gtid_travels_in_headers(dev_server):
    from canalbridge.devkit.entries import BinlogWriter

    workload = Workload(WorkloadSpec(row_changes=20, tables=standard_tables(1)), BinlogWriter(gtid_uuid="u-1"))
    dev_server.feed("example", workload)
    with connector(dev_server) as client:
        client.subscribe()
        assert dev_server.destinations["example"].wait_parsed(10)
        batch = client.get_without_ack(3)
    begin = batch.entries[0]
    assert begin.entryType == entry_pb.EntryType.TRANSACTIONBEGIN
    assert begin.header.gtid == "u-1:1-1"
    assert {p.key: p.value for p in begin.header.props}["curtGtid"] == "u-1:1"


def test_unsubscribe_ends_the_subscription(dev_server):
    with connector(dev_server) as client:
        client.subscribe()
        assert client.get_without_ack(1).is_empty
        client.unsubscribe()
        with pytest.raises(CanalServerError, match="should subscribe first"):
            client.get_without_ack(1)


def test_get_of_a_dropped_connection_that_holds_the_lock_cannot_strand_entries_after_rollback(dev_server):
    # (A get that has not reached the lock yet can: tests/integration/sync/test_stale_get.py.)
    fed(dev_server, rows=3)
    first = connector(dev_server)
    first.connect()
    first.subscribe()
    taken = first.get_without_ack(5)

    def get_until_the_cut() -> None:
        with pytest.raises(CanalConnectionError):
            first.get_without_ack(100, 1500)

    # A get that waits on the server for a full batch, then the network cut.
    waiting = threading.Thread(target=get_until_the_cut)
    waiting.start()
    assert eventually(dev_server.destinations["example"].get_lock.locked, 5)  # the server is in that get
    dev_server.drop_connections()
    waiting.join(10)
    with connector(dev_server) as second:
        second.subscribe()
        second.rollback()
        # The old session's get ends on its own timeout; the rollback waits for it,
        # as Canal's does, so the entries come back instead of going to a dead socket.
        assert offsets(second.get_without_ack(5, timeout_ms=5000)) == offsets(taken)


def test_a_lost_mysql_connection_sends_the_open_transaction_again_in_the_same_stream(dev_server_factory):
    # What real Canal most often does (docs/guide/limits.md#canal-lost-connection): its parser dumps the binlog again
    # from the last transaction end it put; the chunk it was putting into the full store is lost
    # from the first pass, and the chunk after it still comes.
    server = dev_server_factory(DestinationConfig("example", "canal", PASSWORD, capacity=16))
    source = list(Workload(WorkloadSpec(row_changes=120, rows_per_transaction=(2, 40))))
    server.feed("example", source)
    destination = server.destinations["example"]
    with connector(server) as client:
        client.subscribe()
        first = client.get_without_ack(16, timeout_ms=1000)
        assert eventually(lambda: destination.store.put_waiting, 10)  # the store is full
        destination.lose_mysql_connection()
        client.ack(first.batch_id)
        taken = offsets(first)
        while not (batch := client.get_without_ack(16, timeout_ms=200)).is_empty or not server.is_drained("example"):
            taken += offsets(batch)
            client.ack(batch.batch_id)
    places = [(e.header.logfileName, e.header.logfileOffset) for e in source]
    back = [i for i in range(1, len(taken)) if taken[i] <= taken[i - 1]]
    assert len(back) == 1, back  # the stream went back once, with no rollback asked for
    again = taken[back[0]]
    start = places.index(again)
    assert start == 0 or source[start].entryType == entry_pb.EntryType.TRANSACTIONEND
    assert taken[back[0]:] == places[start:]  # the second pass: everything from there, in order
    first_pass = taken[: back[0]]
    assert first_pass == sorted(first_pass) and set(places[start : places.index(first_pass[-1])]) - set(first_pass)
