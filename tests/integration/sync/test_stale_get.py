"""A GET from a dead connection served after the new connection's rollback.

The dev server holds that GET (``Destination.hold_next_get``) until the
Receiver's reconnect has rolled Canal back, then serves it before anything
the new connection asks: the stale batch takes the entries right after the
ack cursor and sits outstanding on the server, handed to nobody. Every run
reproduces the interleaving that real Canal allows only rarely.
"""

from __future__ import annotations

import threading
import time

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.entries import BinlogWriter
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.position import EntryPosition

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


def test_a_restarted_canal_on_a_promoted_replica_whose_binlog_trails_the_ack_pauses_the_job(dev_server_factory):
    # Issue 33, hole 3: the replica's binlog has the old server's file name and trails the ack by less than
    # a file, so file names and numbers pass. A restarted Canal starts at a boundary the job took before
    # (its cursor): this first entry is none of them.
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=standard_tables(2), row_changes=300))
    harness = Harness(server, workload, job_settings(server, workload))
    harness.feed()
    harness.run_until_acked()
    last = EntryPosition.of(harness.workload_entries[-1])
    assert harness.job.acks.wait_through(last, 30), "the job knows Canal took its last ack"
    before = {name: list(writer.commits) for name, writer in harness.writers.items()}
    later = time.time() + 3600  # (its transactions are other ones, with other times)
    promoted = Workload(WorkloadSpec(tables=standard_tables(2), row_changes=100, seed=5),
                        BinlogWriter(server_id=2, clock=lambda: later))
    server.stop()
    server.destinations["example"].read_another_server(promoted)
    server.start()
    assert harness.job.wait_state(JobState.PAUSED, 30), harness.job.stats
    text = harness.job.fail_message.text
    assert "mysql-bin.000001:4 cannot follow the acked position" in text and "this is none" in text
    assert {name: list(writer.commits) for name, writer in harness.writers.items()} == before
    assert not harness.audit.violations


def test_a_restarted_canal_starting_again_at_its_cursor_goes_on(dev_server_factory):
    # The counterpart: the same restart on the same server delivers its cursor's boundary again.
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=standard_tables(2), row_changes=300))
    harness = Harness(server, workload, job_settings(server, workload))
    entries = list(workload)
    harness.set_entries(entries)
    server.feed("example", entries[: len(entries) // 2])
    harness.run_until_acked()
    server.restart(crash=True)  # (everything acked since the last meta flush comes again)
    server.feed("example", entries[len(entries) // 2:])
    harness.wait_acked()
    assert harness.job.state is JobState.RUNNING
    harness.job.pause()
    harness.assert_exact()
