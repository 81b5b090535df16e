"""Atomic cuts on the sync core (``[job.cuts] atomic``): every channel stages its commit, and one publish makes
all of them current, so that whatever a reader sees of the targets is the source at one cut. A publish the
catalog refuses lands nothing and is replayed, its files deleted; one whose reply is lost landed, and is not
applied twice; one refused after it landed (the answer to a retry) keeps its files and is not applied twice; a
channel whose commit fails leaves the others' staged writes unpublished, their files deleted.

The source moves money between accounts (two UPDATEs of ``acct``) and records each transfer in ``ledger`` (an
INSERT), in one transaction: the balances must be those after exactly the transfers the ledger holds.
"""

from __future__ import annotations

from canalbridge.devkit import DestinationConfig
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.settings import ChannelSettings, CutSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from tests.infra.memory_writer import InMemoryPublisher, InMemoryWriter
from tests.integration.spark.test_consistent_cuts import ACCOUNTS, ACCT, LEDGER, Bank
from tests.integration.sync.harness import FAST_COMMITS, AckAudit

PARTS, PER_PART = 8, 20


def test_every_publish_shows_the_targets_at_one_source_cut_and_failed_publishes_land_once(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    bank = Bank(seed=5)
    canal = CanalSettings("127.0.0.1", server.port, "example", batch_size=64, poll_timeout_ms=50)
    settings = JobSettings("atomic", canal, tuple(ChannelSettings(t.qualified, f"lake.bank.{t.name}")
                                                  for t in (ACCT, LEDGER)),
                           FAST_COMMITS, cuts=CutSettings(atomic=True))
    writers: dict[str, InMemoryWriter] = {}

    def sink(channel: ChannelSettings) -> ChannelSink:
        # The ledger's fourth commit fails: the accounts' staged write of that cut is never published.
        fails = {4} if channel.source == LEDGER.qualified else set()
        writers[channel.source] = InMemoryWriter(channel.source, fail_commit_at=fails)
        return ChannelSink.of(writers[channel.source])

    seen: list[tuple[tuple[int, ...], int]] = []  # (balances, ledger rows) after each publish that landed

    def read() -> None:
        acct, ledger = writers[ACCT.qualified].rows, writers[LEDGER.qualified].rows
        seen.append((tuple(int(acct[(str(i),)]["balance"] or 0) for i in range(ACCOUNTS)), len(ledger)))

    publisher = InMemoryPublisher(refuse_at={3}, lose_reply_at={5}, refuse_landed_at={7}, after=read)
    destination = server.destinations["example"]
    audit = AckAudit(writers, destination)
    destination.store.add_ack_listener(audit)
    job = SyncJob(settings, sink, publisher=publisher)
    job.start()
    try:
        for index in range(PARTS):
            server.feed("example", (bank.opening() if index == 0 else []) + bank.part(PER_PART))
            assert destination.wait_acked(60), (job.state, job.fail_message)
    finally:
        job.pause()

    assert publisher.publishes >= 7, "the refused and the lost publishes were among them"
    assert len(publisher.published) == publisher.publishes - 1, "every publish landed but the refused one"
    assert writers[ACCT.qualified].discarded_writes == 2, "the refused publish's, and the failed ledger commit's"
    assert writers[LEDGER.qualified].discarded_writes == 1
    assert not audit.violations, audit.violations[:5]
    assert audit.acked_rows > 0
    for balances, transfers in seen:
        assert balances == bank.states[transfers], f"balances of another cut than the ledger's {transfers} rows"
    assert seen[-1] == (bank.states[-1], bank.transfers)
    # Each change applied once (a replay's label is new: the rows count it).
    assert sum(commit.rows for commit in writers[LEDGER.qualified].commits) == bank.transfers
    assert sum(commit.rows for commit in writers[ACCT.qualified].commits) == ACCOUNTS + 2 * bank.transfers
