"""Consistent cuts over Iceberg: every cut the job logs pins all its targets at one source cut, while each table's
main, read as it moves, goes through states the source never held.

The source moves money: each transaction takes an amount from one account and gives it to another (two UPDATEs
of ``acct``) and records it in ``ledger`` (an INSERT). After ``n`` transfers the ledger holds rows 1..n and the
balances are exactly those after the first ``n``; a state of the two tables where they disagree never held in
the source.
"""

from __future__ import annotations

import random
import time

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, CutSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from spark_sink.cuts import IcebergCutLog
from spark_sink.maintainer import expire_snapshots
from spark_sink.sink import make_sink
from spark_sink.table import TargetTable
from tests.helpers import eventually

EventType = entry_pb.EventType
ACCT = TableDef("bank", "acct", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("balance", "bigint(20)")))
LEDGER = TableDef("bank", "ledger", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("src", "int(11)"),
                                     ColumnDef.of("dst", "int(11)"), ColumnDef.of("amount", "bigint(20)")))
BRANCH = TableDef("bank", "branch", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("city", "varchar(16)")))
ACCOUNTS, START = 6, 1_000
PARTS, PER_PART = 4, 60
NAMESPACE = "cuts"
COMMITS = CommitSettings(interval_seconds=0.5, min_events=50, min_bytes=1, retries=100, retry_initial_seconds=0.05,
                         retry_max_seconds=0.5)


class Bank:
    """The source: its entries part by part, and the balances after each transfer (``states[n]``)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._writer = BinlogWriter()
        self.balances = [START] * ACCOUNTS
        self.states = [tuple(self.balances)]
        self.transfers = 0

    def opening(self) -> list[entry_pb.Entry]:
        writer = self._writer
        return [*writer.open(),
                *writer.statement(ACCT, EventType.INSERT, [(None, {"id": i, "balance": START})
                                                           for i in range(ACCOUNTS)]),
                *writer.statement(BRANCH, EventType.INSERT, [(None, {"id": 1, "city": "Hangzhou"})]),
                writer.end()]

    def part(self, count: int) -> list[entry_pb.Entry]:
        writer, entries = self._writer, []
        for _ in range(count):
            src, dst = self._rng.sample(range(ACCOUNTS), 2)
            amount = self._rng.randint(1, 50)
            self.transfers += 1
            entries += writer.open()
            for account, delta in ((src, -amount), (dst, amount)):
                before = {"id": account, "balance": self.balances[account]}
                self.balances[account] += delta
                entries += writer.statement(ACCT, EventType.UPDATE,
                                            [(before, {"id": account, "balance": self.balances[account]})])
            entries += writer.statement(LEDGER, EventType.INSERT, [(None, {"id": self.transfers, "src": src,
                                                                           "dst": dst, "amount": amount})])
            entries.append(writer.end())
            self.states.append(tuple(self.balances))
        return entries


def target(table: TableDef) -> str:
    return f"lake.{NAMESPACE}.{table.name}"


def transfers_held(spark, acct_version: str, ledger_version: str) -> tuple[int | None, int]:
    """(how many transfers the balances at ``acct_version`` are the state after, None if after none; the
    ledger's rows at ``ledger_version``), each version a tag or a snapshot id."""
    balances = {row["id"]: row["balance"] for row in spark.sql(
        f"SELECT id, balance FROM {target(ACCT)} VERSION AS OF {acct_version}").collect()}
    ledger = spark.sql(f"SELECT count(*) AS n, max(id) AS top FROM {target(LEDGER)} VERSION AS OF "
                       f"{ledger_version}").first()
    assert ledger["n"] == (ledger["top"] or 0), "the ledger holds rows 1..n"
    return tuple(balances[i] for i in range(ACCOUNTS)), ledger["n"]  # type: ignore[return-value]


def test_every_logged_cut_pins_all_targets_at_one_source_cut(spark, spark_settings, dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    bank = Bank(seed=7)
    canal = CanalSettings("127.0.0.1", server.port, "example", batch_size=64, poll_timeout_ms=100)
    settings = JobSettings("cutjob", canal, tuple(ChannelSettings(t.qualified, target(t)) for t in (ACCT, LEDGER,
                                                                                                    BRANCH)),
                           COMMITS, cuts=CutSettings(interval_seconds=0.1, keep=3))
    cut_log = IcebergCutLog(lambda: spark, settings.name, settings.cuts, f"lake.{NAMESPACE}.cut_log")
    job = SyncJob(settings, lambda channel: make_sink(spark, channel, settings.name, spark_settings), cut_log=cut_log)
    job.start()
    try:
        ends = []
        for index in range(PARTS):
            entries = (bank.opening() if index == 0 else []) + bank.part(PER_PART)
            server.feed("example", entries)
            ends.append(str(EntryPosition.of(entries[-1])))
            assert server.destinations["example"].wait_acked(120), (job.state, job.fail_message)
            # Each part's last cut is logged before the next part is fed: a cut per part at least.
            assert eventually(lambda: (cut := job.record().cut) is not None and cut.position == ends[-1], 60), (
                job.record().cut, job.record().cut_error)
    finally:
        job.pause()

    rows = spark.sql(f"SELECT * FROM lake.{NAMESPACE}.cut_log WHERE job = 'cutjob' ORDER BY seq").collect()
    assert len(rows) == 3, "the log keeps the newest `keep` cuts"
    assert rows[0]["seq"] < rows[1]["seq"] < rows[2]["seq"] and job.record().cut.seq == rows[-1]["seq"]
    assert rows[-1]["position"] == ends[-1]
    for row in rows:
        tag = f"'{row['tag']}'"
        balances, n = transfers_held(spark, tag, tag)
        assert balances == bank.states[n], f"{row['tag']}: the balances after {n} transfers"
        assert row["snapshots"] == {
            each: spark.sql(f"SELECT snapshot_id FROM {each}.refs WHERE name = '{row['tag']}'").first()["snapshot_id"]
            for each in (target(ACCT), target(LEDGER), target(BRANCH))}
        assert spark.sql(f"SELECT city FROM {target(BRANCH)} VERSION AS OF {tag}").collect()[0]["city"] == "Hangzhou"
    assert transfers_held(spark, f"'{rows[-1]['tag']}'", f"'{rows[-1]['tag']}'")[1] == PARTS * PER_PART
    for each in (target(ACCT), target(LEDGER)):
        tags = {row["name"] for row in spark.sql(f"SELECT name FROM {each}.refs WHERE type = 'TAG'").collect()}
        assert tags == {row["tag"] for row in rows}, f"{each} keeps the newest `keep` tags only"

    # Each table's main, read between the two tables' commits of one cut, showed balances and a ledger of
    # different transfers: what a reader who joins the mains as they move can see.
    history = sorted([(row["made_current_at"], each, row["snapshot_id"])
                      for each in (ACCT, LEDGER)
                      for row in spark.sql(f"SELECT * FROM {target(each)}.history").collect()],
                     key=lambda event: event[0])
    current: dict[str, int] = {}
    torn = 0
    for index, (when, table, snapshot_id) in enumerate(history):
        current[table.name] = snapshot_id
        if len(current) < 2 or (index + 1 < len(history) and history[index + 1][0] == when):
            continue  # (two commits in the same millisecond: no reader saw either alone)
        balances, n = transfers_held(spark, str(current["acct"]), str(current["ledger"]))
        torn += balances != bank.states[n]
    assert torn > 0, "reading each table's main as it moves shows a state no source transaction left"

    # Maintenance expires every snapshot older than now but those a tag holds: each logged cut still reads.
    for each in (ACCT, LEDGER):  # (branch has one snapshot: its current one)
        assert expire_snapshots(TargetTable(spark, target(each)), int(time.time() * 1000)) > 0
    for row in rows:
        tag = f"'{row['tag']}'"
        balances, n = transfers_held(spark, tag, tag)
        assert balances == bank.states[n], f"{row['tag']}, after expiry"
