"""Canal sends part of the binlog again in the same stream (its MySQL connection broke): each change lands once.

Canal then dumps the binlog again from the last transaction end it had put,
with no rollback; its first pass can even have a gap there that only the
second pass fills (docs/guide/limits.md#canal-lost-connection, :mod:`canalbridge.sync.consumer.second_pass`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, Flavor, TableDef
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.consumer import taken
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings
from tests.helpers import eventually

from .harness import FAST_COMMITS, Harness, Strike, expected_writes_by_position, job_settings, run_through


@pytest.mark.parametrize("flavor", [Flavor.MYSQL, Flavor.MARIADB])
@pytest.mark.parametrize("into_the_transaction", [1, 3, 6])
def test_canal_sending_part_of_a_transaction_again_applies_each_change_once(dev_server_factory, flavor,
                                                                            into_the_transaction):
    # Canal had read part of a transaction when its MySQL connection broke: it sends its
    # last transaction end and that part again, in the same stream (docs/guide/limits.md#canal-lost-connection).
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(row_changes=600, rows_per_transaction=(8, 20)), BinlogWriter(flavor=flavor))
    harness = Harness(server, workload, job_settings(server, workload, batch_size=16))
    entries = list(workload)
    ends = [i for i, entry in enumerate(entries) if entry.entryType == entry_pb.EntryType.TRANSACTIONEND]
    cut = ends[len(ends) * 2 // 3] + 1 + into_the_transaction
    harness.set_entries(entries)
    destination = server.destinations["example"]
    server.feed("example", entries[:cut])  # what Canal has read so far
    harness.job.start()
    assert destination.wait_parsed(30)
    assert destination.store.wait_for(lambda cursors: cursors.get == cursors.put, 30)  # the job has it all
    destination.lose_mysql_connection()
    server.feed("example", entries[cut:])
    harness.wait_acked()
    harness.job.pause()
    harness.assert_exact()
    assert harness.job.stats.went_back == 1


@pytest.fixture
def quickly_starved(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job counts the source as starved after 0.05 s rather than 1 s: the small store fills in the middle
    of transactions all along, and each time the job waits that long before it splits one to free the store
    (at 1 s, some 45 waits made each of these tests take 50 s)."""
    monkeypatch.setattr(taken, "STARVED_AFTER_S", 0.05)


# A store of 64 entries never holds min_events: every commit waits out the interval.
SMALL_STORE_COMMITS = dataclasses.replace(FAST_COMMITS, store_capacity=64, interval_seconds=0.05)


def _lose_the_connection_once_the_store_is_full(harness: Harness) -> None:
    """Run the job; once 300 entries are acked and the store is full, Canal's MySQL connection breaks."""
    destination = harness.server.destinations["example"]

    def lose_while_the_store_is_full():
        assert eventually(lambda: destination.store.put_waiting, 30)
        destination.lose_mysql_connection()

    run_through(harness, Strike(harness, 300, lose_while_the_store_is_full))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("mode", ["upsert", "changelog"])
def test_a_first_pass_gap_behind_a_commit_is_filled_in_from_the_second_pass(dev_server_factory, quickly_starved,
                                                                            mode, seed):
    # Canal's MySQL connection breaks while its store is full: the chunk being put is lost from the
    # first pass, the job splits source transactions past it to free the store, and only Canal's
    # second pass (from the last transaction end it put) has the missing entries.
    server = dev_server_factory(DestinationConfig("example", capacity=SMALL_STORE_COMMITS.store_capacity))
    workload = Workload(WorkloadSpec(row_changes=1500, rows_per_transaction=(1, 30), seed=seed), BinlogWriter())
    commit = SMALL_STORE_COMMITS
    harness = Harness(server, workload, job_settings(server, workload, commit=commit, batch_size=16, mode=mode),
                      **{t.qualified: {"keep_changes": True} for t in workload.spec.tables})
    harness.feed()
    destination = server.destinations["example"]
    _lose_the_connection_once_the_store_is_full(harness)
    assert destination.sent_again and harness.job.stats.went_back >= 1, "Canal sent part of the binlog again"
    assert not harness.audit.violations, harness.audit.violations[:5]
    applied = sum((writer.changes for writer in harness.writers.values()), Counter())
    expected = expected_writes_by_position(harness.workload_entries)
    if mode == "changelog":
        # (The in-memory writer keeps rows by key whatever the mode: a changelog is its changes.)
        assert applied == expected, "a changelog must hold each change once"
    else:
        assert applied.keys() == expected.keys(), "a change was lost"
        harness.assert_tables()


def test_a_failed_commit_never_lets_a_replay_that_went_back_ack_what_it_held(dev_server_factory):
    # Issue 33, hole 1. A commit that splits a source transaction (its cut lies past the last
    # transaction end Canal put) fails, and Canal's MySQL connection broke meanwhile: the replay
    # meets Canal's second pass, marks the first pass's copies to skip and acks the batches they
    # were in. It may ack them only through a cut that landed: the failed one holds nothing.
    server = dev_server_factory(DestinationConfig("example"))
    spec = WorkloadSpec(tables=standard_tables(1), row_changes=60, rows_per_transaction=(6, 10))
    workload = Workload(spec, BinlogWriter())
    entries = list(workload)
    ends = [i for i, entry in enumerate(entries) if entry.entryType == entry_pb.EntryType.TRANSACTIONEND]
    fed = entries[: ends[1] + 1 + 4]  # two transactions, then a third that Canal has begun to read
    # Every entry fed makes the first commit due (and no clock does); it must split the open transaction.
    commit = dataclasses.replace(FAST_COMMITS, interval_seconds=3600.0, min_events=len(fed),
                                 max_source_txn_wait_seconds=0.0, overlap=False)
    destination = server.destinations["example"]
    struck = threading.Event()

    def lose_the_connection_then_fail(writer, cut):
        if struck.is_set():
            return
        struck.set()
        destination.lose_mysql_connection()  # Canal puts its last transaction end and what follows again
        assert eventually(lambda: destination.sent_again, 30)
        assert destination.wait_parsed(30)

    harness = Harness(server, workload, job_settings(server, workload, commit=commit),
                      **{spec.tables[0].qualified: {"keep_changes": True, "fail_commit_at": {1},
                                                    "before_commit": lose_the_connection_then_fail}})
    harness.set_entries(fed)
    server.feed("example", fed)
    harness.run_until_acked()
    harness.job.pause()
    assert struck.is_set() and harness.job.stats.went_back == 1
    assert not harness.audit.violations, harness.audit.violations[:5]
    (writer,) = harness.writers.values()
    assert writer.changes == expected_writes_by_position(fed), "each change fed lands once"


def test_entries_of_another_binlog_in_one_connection_pause_the_job_and_none_is_applied(dev_server_factory):
    # Issue 33, hole 3: Canal switches MySQL servers within one connection (its own HA, or its parser
    # reconnecting to another master). The new server's positions go back further than Canal's second
    # pass ever goes: not a re-send, another binlog.
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(row_changes=200, rows_per_transaction=(1, 8)), BinlogWriter(server_id=1))
    harness = Harness(server, workload, job_settings(server, workload))
    harness.feed()
    harness.run_until_acked()
    assert harness.job.acks.wait_through(EntryPosition.of(harness.workload_entries[-1]), 30)
    applied = {name: list(writer.commits) for name, writer in harness.writers.items()}
    later = time.time() + 3600  # (its transactions are other ones, with other times)
    promoted = Workload(WorkloadSpec(row_changes=40, rows_per_transaction=(1, 8), seed=7),
                        BinlogWriter(server_id=2, clock=lambda: later))
    server.feed("example", promoted)  # the same file name, from its start: positions before the acked ones
    assert harness.job.wait_state(JobState.PAUSED, 30), harness.job.stats
    text = harness.job.fail_message.text
    assert "further back than it ever sends part of the binlog again" in text
    assert {name: list(writer.commits) for name, writer in harness.writers.items()} == applied, \
        "nothing of the other binlog may be applied"
    harness.assert_exact()


def test_entries_of_a_binlog_of_another_name_in_one_connection_pause_the_job(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(row_changes=100, rows_per_transaction=(1, 8)), BinlogWriter())
    harness = Harness(server, workload, job_settings(server, workload))
    entries = list(workload)
    ends = [i for i, entry in enumerate(entries) if entry.entryType == entry_pb.EntryType.TRANSACTIONEND]
    first = ends[len(ends) // 2] + 1
    assert len(entries) - first < 200  # the rest and the first entry of the other binlog: one parser chunk, one get
    harness.set_entries(entries)
    server.feed("example", entries[:first])
    harness.run_until_acked()
    other = Workload(WorkloadSpec(row_changes=20, seed=7), BinlogWriter(server_id=2, journal_prefix="db2-bin"))
    server.feed("example", entries[first:] + list(other))  # positions of a binlog of another name, mid-batch
    assert harness.job.wait_state(JobState.PAUSED, 30), harness.job.stats
    assert "entry at db2-bin.000001" in harness.job.fail_message.text
    assert "Canal switched MySQL servers?" in harness.job.fail_message.text
    assert not harness.audit.violations, harness.audit.violations[:5]
    assert all(writer.committed_position().journal == "mysql-bin.000001" for writer in harness.writers.values())


@pytest.mark.parametrize("seed", [2, 4])
def test_a_failed_commit_that_filled_a_first_pass_gap_is_filled_again(dev_server_factory, quickly_starved, seed):
    # The commit that carries what Canal's first pass missed fails. Its cut lies behind the table's
    # position, so that position cannot tell whether it landed: the replay must apply the missed
    # entries again unless the target says this very commit landed.
    server = dev_server_factory(DestinationConfig("example", capacity=SMALL_STORE_COMMITS.store_capacity))
    workload = Workload(WorkloadSpec(row_changes=1500, rows_per_transaction=(1, 30), seed=seed), BinlogWriter())
    commit = SMALL_STORE_COMMITS
    failed = threading.Event()
    jobs: list = []

    def fail_the_first_commit_that_fills(writer, cut):
        if not failed.is_set() and jobs[0].stats.filled_in:
            failed.set()
            raise RuntimeError("injected: the commit that fills the gap fails")

    harness = Harness(server, workload, job_settings(server, workload, commit=commit, batch_size=16,
                                                     mode="changelog"),
                      **{t.qualified: {"keep_changes": True, "before_commit": fail_the_first_commit_that_fills}
                         for t in workload.spec.tables})
    jobs.append(harness.job)
    harness.feed()
    _lose_the_connection_once_the_store_is_full(harness)
    assert harness.job.stats.filled_in and failed.is_set()
    applied = sum((writer.changes for writer in harness.writers.values()), Counter())
    assert applied == expected_writes_by_position(harness.workload_entries), "a changelog must hold each change once"


@pytest.mark.parametrize("mode", ["upsert", "changelog"])
def test_a_refill_an_earlier_process_stopped_in_goes_on_from_what_the_target_says(dev_server_factory, mode):
    # Issue 33, hole 7. Canal's first pass missed two changes (m1, m2) behind a commit through P. A
    # process filled m1 in (a commit behind P, stamped P and "behind r") and stopped before m2; only its
    # memory knew. Its successor meets Canal sending again from before r, and must go on from the target:
    # an upsert applies everything through P again, in order; a changelog what it lacks.
    server = dev_server_factory(DestinationConfig("example"))
    table = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("v", "int(11)")))
    binlog = BinlogWriter()

    def transaction(kind: int, row: dict, before: dict | None = None) -> list[entry_pb.Entry]:
        return [*binlog.open(), binlog.rows(table, kind, [(before, row)]), binlog.end()]

    first = transaction(entry_pb.EventType.INSERT, {"id": 1, "v": 1})
    m1 = transaction(entry_pb.EventType.UPDATE, {"id": 1, "v": 2}, {"id": 1, "v": 1})
    m2 = transaction(entry_pb.EventType.INSERT, {"id": 2, "v": 1})
    last = transaction(entry_pb.EventType.UPDATE, {"id": 1, "v": 3}, {"id": 1, "v": 2})  # P: its end
    later = transaction(entry_pb.EventType.INSERT, {"id": 3, "v": 1})
    behind, held = EntryPosition.of(m1[-1]), EntryPosition.of(last[-1])
    workload = Workload(WorkloadSpec(tables=(table,), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), channels=(
        ChannelSettings("db.t", "lake.t", mode=mode),))
    harness = Harness(server, workload, settings, **{"db.t": {"keep_changes": True}})
    harness.job.start()  # (opens the channel and its writer: the earlier process's target is made below)
    harness.job.pause()
    writer = harness.writers["db.t"]
    columns = (SourceColumn("id", "int(11)", 4, True), SourceColumn("v", "int(11)", 4, False))

    def change(transaction: list[entry_pb.Entry], kind: ChangeKind, values: tuple[str, str]) -> ChangeRow:
        rows = next(e for e in transaction if e.entryType == entry_pb.EntryType.ROWDATA)
        return ChangeRow(kind, values, EntryPosition.of(rows))

    def applied(changes: list[ChangeRow], stamp: EntryPosition, reached: EntryPosition | None = None) -> None:
        writer.begin()
        writer.send(RowBatch("db.t", ("id", "v"), columns, (0,), tuple(changes)))
        writer.seal().apply(stamp, f"earlier-{len(writer.commits)}", behind=reached)

    # The first pass: everything through P but m1 and m2. Then the fill of m1 (an upsert applies again what
    # follows it through r, the end of m1's transaction: nothing more here).
    applied([change(first, ChangeKind.INSERT, ("1", "1")), change(last, ChangeKind.UPDATE_AFTER, ("1", "3"))], held)
    applied([change(m1, ChangeKind.UPDATE_AFTER, ("1", "2"))], held, behind)
    assert writer.rows == {("1",): {"id": "1", "v": "2"}}  # (key 1 is back at m1's value)
    server.feed("example", [*m1, *m2, *last, *later])  # Canal again from its cursor, before r
    harness.set_entries([*first, *m1, *m2, *last, *later])
    harness.job.resume()
    harness.wait_acked()
    harness.job.pause()
    assert harness.job.state is JobState.PAUSED and harness.job.fail_message is None
    if mode == "upsert":
        assert writer.rows == {("1",): {"id": "1", "v": "3"}, ("2",): {"id": "2", "v": "1"},
                               ("3",): {"id": "3", "v": "1"}}
    else:  # (the in-memory writer keys rows whatever the mode: a changelog is its changes)
        expected = expected_writes_by_position(harness.workload_entries)
        assert writer.changes == expected, "a changelog must hold each change once"
    state = writer.read_state()
    assert (state.position, state.refill) == (EntryPosition.of(later[-1]), None)
