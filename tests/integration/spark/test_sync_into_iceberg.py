"""The sync core into real Iceberg tables: exact tables, exactly once across a restart, faults."""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections import Counter
from pathlib import Path

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.verify import expected_typed, read_typed
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.job.job import FailKind, JobState, SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.errors import TargetTableError
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from tests.helpers import eventually
from tests.infra.replay import row_changes

COMMITS = CommitSettings(interval_seconds=1.0, min_events=5000, min_bytes=1, retries=100,
                         retry_initial_seconds=0.05, retry_max_seconds=0.5, max_source_txn_wait_seconds=10)
EventType = entry_pb.EventType


def settings_for(server, tables, namespace, *, mode="upsert", commit=COMMITS, destination="example") -> JobSettings:
    canal = CanalSettings("127.0.0.1", server.port, destination, batch_size=512, poll_timeout_ms=100)
    channels = tuple(ChannelSettings(t.qualified, f"lake.{namespace}.{t.name}", mode=mode) for t in tables)
    return JobSettings(f"job-{namespace}", canal, channels, commit)


def factory(spark, spark_settings, job_name):
    return lambda channel: make_sink(spark, channel, job_name, spark_settings)


def assert_tables_exact(spark, workload, namespace):
    for name, expected in workload.expected.items():
        table = expected.table
        actual = read_typed(spark, f"lake.{namespace}.{table.name}", table)
        assert actual == expected_typed(table, expected.rows.values()), name


def delete_files(spark, target: str) -> set[str]:
    """The kinds of delete file ``target``'s main holds."""
    kinds = {1: "position", 2: "equality"}
    return {kinds[row["content"]] for row in
            spark.sql(f"SELECT DISTINCT content FROM {quote_table(target)}.files WHERE content > 0").collect()}


@pytest.mark.parametrize("deletes", ["position", "equality"])  # [spark] upsert_deletes
def test_workload_lands_exactly_in_iceberg(spark, spark_settings, dev_server_factory, deletes):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=standard_tables(3), row_changes=1500, pk_change_ratio=0.2, seed=5))
    server.feed("example", workload)
    namespace = f"e2e_{deletes}"
    settings = settings_for(server, workload.spec.tables, namespace)
    job = SyncJob(settings, factory(spark, dataclasses.replace(spark_settings, upsert_deletes=deletes),
                                    settings.name))
    job.start()
    assert server.destinations["example"].wait_acked(180), (job.state, job.fail_message)
    job.pause()
    assert job.stats.rollbacks == 0
    assert_tables_exact(spark, workload, namespace)
    summary = spark.sql(f"SELECT summary FROM lake.{namespace}.orders.snapshots ORDER BY committed_at DESC "
                        "LIMIT 1").first()
    assert summary["summary"]["canalbridge.job"] == f"job-{namespace}"
    assert int(summary["summary"]["canalbridge.offset"]) > 0
    for table in workload.spec.tables:
        target = f"lake.{namespace}.{table.name}"
        found = delete_files(spark, target)
        # (A table whose changes all land in its first commit has nothing to delete by position.)
        assert found == {"equality"} if deletes == "equality" else found <= {"position"}, (target, found)
        if deletes == "equality":  # one RowDelta per commit, straight onto main: no branch, no DELETE then INSERT
            operations = spark.sql(f"SELECT DISTINCT operation FROM {quote_table(target)}.snapshots").collect()
            assert {row["operation"] for row in operations} <= {"overwrite", "delete"}, target  # (delete: no row)


def changelog_rows_expected(entries, table: str) -> int:
    """Rows a changelog must hold: +I and -D one each, an UPDATE two (-U, +U)."""
    return sum(2 if event_type == EventType.UPDATE else 1
               for name, event_type, _ in row_changes(entries) if name.endswith(f".{table}"))


def test_restart_between_commit_and_ack_applies_nothing_twice(spark, spark_settings, dev_server_factory):
    # One destination per mode, each fed the same binlog: one job per destination, as in production.
    modes = {"upsert": "restart_upsert", "changelog": "restart_log"}
    # Canal's meta never flushes: after a crash it sends everything again, as if it had never seen an ack.
    server = dev_server_factory(*(DestinationConfig(mode, meta_flush_period_s=math.inf) for mode in modes))
    tables = standard_tables(3)[1:]  # orders and accounts
    workload = Workload(WorkloadSpec(tables=tables, row_changes=1200, pk_change_ratio=0.2, seed=8))
    entries = list(workload)
    ends = [i for i, e in enumerate(entries) if e.entryType == entry_pb.EntryType.TRANSACTIONEND]
    first_part = ends[len(ends) // 2] + 1
    last_of_part = EntryPosition.of(entries[first_part - 1])

    def new_job(mode: str) -> SyncJob:
        settings = settings_for(server, tables, modes[mode], mode=mode, destination=mode)
        return SyncJob(settings, factory(spark, spark_settings, settings.name))

    # Run 1: the targets commit; Canal's cursor keeps none of the acks, as when the
    # daemon dies between a commit and its ack.
    for mode in modes:
        server.feed(mode, entries[:first_part])
    first_jobs = [new_job(mode) for mode in modes]
    for job in first_jobs:
        job.start()
    for job in first_jobs:
        assert job.acks.wait_through(last_of_part, 120)
        job.pause()
    server.restart(crash=True)

    # Run 2: new jobs read their positions back from the snapshots; Canal replays everything.
    second_jobs = []
    for mode in modes:
        server.feed(mode, entries[first_part:])
        job = new_job(mode)
        job.start()
        assert job.committed.as_dict(), "committed positions were not read back from the snapshots"
        second_jobs.append(job)
    for mode, job in zip(modes, second_jobs):
        assert server.destinations[mode].wait_acked(180), (job.state, job.fail_message)
        job.pause()
        assert job.stats.skipped > 0

    assert_tables_exact(spark, workload, "restart_upsert")
    for table in tables:
        rows = spark.table(quote_table(f"lake.restart_log.{table.name}"))
        assert rows.count() == changelog_rows_expected(entries, table.name), table.name
        keys = Counter(tuple(r) for r in rows.select("_journal", "_offset", "_seq", "_op").collect())
        assert max(keys.values()) == 1, "a change was appended twice"


def test_failing_merge_rolls_back_and_converges_once_fixed(spark, spark_settings, dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    tables = standard_tables(2)[1:]  # orders
    workload = Workload(WorkloadSpec(tables=tables, row_changes=800, seed=13))
    entries = list(workload)
    split = len(entries) // 3
    server.feed("example", entries[:split])
    settings = settings_for(server, tables, "faulty")
    job = SyncJob(settings, factory(spark, spark_settings, settings.name))
    job.start()
    assert server.destinations["example"].wait_acked(120)

    data_dir = Path(spark_settings.warehouse) / "faulty" / "orders" / "data"
    moved = data_dir.with_name("data.moved")
    data_dir.rename(moved)
    data_dir.write_text("not a directory: new data files cannot be written")
    ack_before = server.cursors("example").ack
    server.feed("example", entries[split:])
    try:
        assert eventually(lambda: job.stats.rollbacks >= 2, 120), job.stats
        assert server.cursors("example").ack == ack_before  # nothing acked while the MERGE fails
        assert job.state is JobState.RUNNING
    finally:
        data_dir.unlink()
        shutil.move(str(moved), str(data_dir))
    assert server.destinations["example"].wait_acked(180), (job.state, job.fail_message)
    job.pause()
    assert_tables_exact(spark, workload, "faulty")


def test_malformed_target_pauses_the_job_with_the_name(spark, spark_settings, dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    tables = standard_tables(2)[1:]
    settings = settings_for(server, tables, "badname")
    settings = dataclasses.replace(
        settings, channels=(dataclasses.replace(settings.channels[0], target="lake.onlytwo"),)
    )
    job = SyncJob(settings, factory(spark, spark_settings, settings.name))
    with pytest.raises(TargetTableError):
        job.start()
    assert job.state is JobState.PAUSED and job.fail_message.kind is FailKind.SUBMIT_FAIL  # no retry: a person
    assert job.record().start_retry is None
    assert "lake.onlytwo" in job.fail_message.text and "catalog.namespace.table" in job.fail_message.text
