"""A GET from a dead connection served after the new connection's rollback.

The dev server holds that GET (``Destination.hold_next_get``) until the
Receiver's reconnect has rolled Canal back, then serves it before anything
the new connection asks: the stale batch takes the entries right after the
ack cursor and sits outstanding on the server, handed to nobody. Every run
reproduces the interleaving that real Canal allows only rarely.
"""

from __future__ import annotations

import threading

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.workload import Workload, WorkloadSpec

from .harness import Harness, job_settings


def _cut_the_connection_under_the_held_get(harness: Harness, hold) -> threading.Thread:
    """Once the Receiver's GET is held, drop its connection, so the Receiver reconnects and rolls back."""

    def cut() -> None:
        if hold.wait_parked(30):
            harness.server.drop_connections()

    thread = threading.Thread(target=cut, name="cut-under-held-get")
    thread.start()
    return thread


def test_a_stale_get_served_after_the_rollback_loses_no_row(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example", capacity=4096))
    workload = Workload(WorkloadSpec(row_changes=3000, pk_change_ratio=0.2, seed=11))
    harness = Harness(server, workload, job_settings(server, workload, batch_size=64))
    destination = server.destinations["example"]
    holds = []
    cutters = []
    acked = []

    def hold_after_some_acks(events):
        # Runs under the store's lock, so it only counts. Mid-run, once some
        # batches are acked, the next GET is the stale one.
        acked.extend(events)
        if not holds and len(acked) > 600:
            holds.append(destination.hold_next_get())
            cutters.append(_cut_the_connection_under_the_held_get(harness, holds[0]))

    destination.store.add_ack_listener(hold_after_some_acks)
    harness.feed()
    harness.run_until_acked(timeout_s=60)
    harness.job.pause()
    for cutter in cutters:
        cutter.join()
    assert holds and holds[0].wait_served(0), "the held GET was never served after a rollback"
    assert holds[0].batch_id is not None and holds[0].batch_id > 0, "the stale GET took no entries"
    harness.assert_exact()


def test_a_stale_get_that_takes_the_tail_does_not_stall_the_job(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=standard_tables(2), row_changes=200, seed=5))
    harness = Harness(server, workload, job_settings(server, workload, batch_size=4096))
    destination = server.destinations["example"]
    harness.feed()
    destination.start_parser()
    assert destination.wait_parsed(10)  # the whole workload is in the store: the stale GET takes all of it
    hold = destination.hold_next_get()
    cutter = _cut_the_connection_under_the_held_get(harness, hold)
    harness.run_until_acked(timeout_s=30)
    harness.job.pause()
    cutter.join()
    assert hold.wait_served(0) and hold.batch_id is not None and hold.batch_id > 0
    harness.assert_exact()
