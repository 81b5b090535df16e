"""A sync job wired to a dev server and in-memory writers, with the checks every test wants."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from dataclasses import dataclass, field

from canalbridge.devkit import DevServer
from canalbridge.devkit.destination import Destination
from canalbridge.devkit.store import StoredEvent
from canalbridge.devkit.workload import Workload
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.sink import CatalogPublisher, ChannelSink
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.canal.settings import CanalSettings
from tests.infra.memory_writer import InMemoryWriter
from tests.infra.replay import row_changes

EventType = entry_pb.EventType

FAST_COMMITS = CommitSettings(
    interval_seconds=0.2, min_events=400, min_bytes=1, max_bytes=1 << 30,
    retries=50, retry_initial_seconds=0.01, retry_max_seconds=0.05, reconnect_attempts=50,
    max_source_txn_wait_seconds=5.0,
)


def job_settings(server: DevServer, workload: Workload, *, commit: CommitSettings = FAST_COMMITS,
                 batch_size: int = 256, destination: str = "example", password: str = "",
                 mode: str = "upsert") -> JobSettings:
    canal = CanalSettings("127.0.0.1", server.port, destination, username="canal" if password else "",
                          password=password, batch_size=batch_size, poll_timeout_ms=50)
    # The job is told the store's mode and unit, as a user copies them from canal.properties.
    store = server.destinations[destination].store
    commit = dataclasses.replace(commit, store_batch_mode=store.batch_mode.value, store_memunit=store.mem_unit)
    channels = tuple(ChannelSettings(t.qualified, f"lake.{t.qualified}", mode=mode) for t in workload.spec.tables)
    return JobSettings("job1", canal, channels, commit)


@dataclass
class AckAudit:
    """Checks, at every ack the server takes, that each acked row's table has committed it."""

    writers: dict[str, InMemoryWriter]
    destination: Destination
    violations: list[str] = field(default_factory=list)
    acked_rows: int = 0

    def __call__(self, events: list[StoredEvent]) -> None:
        for event in events:
            if event.entry_type != entry_pb.EntryType.ROWDATA or event.event_type not in (
                EventType.INSERT, EventType.UPDATE, EventType.DELETE
            ):
                continue
            writer = self.writers.get(f"{event.schema}.{event.table}")
            if writer is None:
                continue
            self.acked_rows += 1
            committed = writer.committed_position()
            position = EntryPosition(event.position.journal, event.position.offset)
            if (committed is None or committed < position) and event.position not in self.destination.sent_again:
                # (A row the server put back after a lost MySQL connection comes again.)
                self.violations.append(f"{event.schema}.{event.table} row at {position} acked, committed {committed}")


class Harness:
    """Build writers through the job's factory, audit acks, and compare with the expected tables."""

    def __init__(self, server: DevServer, workload: Workload, settings: JobSettings, *,
                 publisher: CatalogPublisher | None = None, **writer_options) -> None:
        """``publisher``: the catalog commit of a job whose cuts are atomic; ``writer_options`` by channel source:
        the :class:`InMemoryWriter` options of its writer."""
        self.server = server
        self.workload = workload
        self.writers: dict[str, InMemoryWriter] = {}
        self._writer_options = writer_options
        destination = server.destinations[settings.source.destination]
        self.audit = AckAudit(self.writers, destination)
        destination.store.add_ack_listener(self.audit)
        self.job = SyncJob(settings, self._make_sink, publisher=publisher)

    def _make_sink(self, channel: ChannelSettings) -> ChannelSink:
        options = self._writer_options.get(channel.source, {})
        writer = self.writers[channel.source] = InMemoryWriter(channel.source, **options)
        return ChannelSink.of(writer)

    def run_until_acked(self, timeout_s: float = 60) -> None:
        self.job.start()
        self.wait_acked(timeout_s)

    def wait_acked(self, timeout_s: float = 60) -> None:
        assert self.server.destinations[self.job.settings.source.destination].wait_acked(timeout_s), (
            f"not everything was acked in {timeout_s} s: {self.job.state} {self.job.fail_message} {self.job.stats}"
        )

    def assert_exact(self) -> None:
        """No ack before its commit, tables as expected, and each row change applied once."""
        assert not self.audit.violations, self.audit.violations[:5]
        self.assert_tables()
        applied = Counter({name: sum(c.rows for c in w.commits) for name, w in self.writers.items()})
        assert applied == expected_row_writes(self.workload_entries), "a row change was applied twice or lost"

    def assert_tables(self) -> None:
        """Every target holds what the workload left in its table."""
        for name, expected in self.workload.expected.items():
            assert self.writers[name].rows == expected.canal_rows(), name

    @property
    def workload_entries(self) -> list[entry_pb.Entry]:
        return self._entries

    def feed(self) -> None:
        self.set_entries(list(self.workload))
        self.server.feed(self.job.settings.source.destination, self._entries)

    def set_entries(self, entries: list[entry_pb.Entry]) -> None:
        """The workload's entries, for :meth:`assert_exact`, when the test feeds them itself."""
        self._entries = entries


def expected_row_writes(entries: list[entry_pb.Entry]) -> Counter:
    """How many row writes each table must receive: UPDATEs that change the key write two."""
    counts: Counter = Counter()
    for table, event_type, row in row_changes(entries):
        counts[table] += _writes(event_type, row)
    return counts


def expected_writes_by_position(entries: list[entry_pb.Entry]) -> Counter:
    """How many row writes each entry's binlog position must bring, as :func:`expected_row_writes` counts."""
    counts: Counter = Counter()
    for entry in entries:
        for _, event_type, row in row_changes([entry]):
            counts[EntryPosition.of(entry)] += _writes(event_type, row)
    return counts


def _writes(event_type: int, row: entry_pb.RowData) -> int:
    if event_type != EventType.UPDATE:
        return 1
    before = [c.value for c in row.beforeColumns if c.isKey]
    after = [c.value for c in row.afterColumns if c.isKey]
    return 1 + (before != after)


class Strike:
    """Runs ``act`` in a thread of its own once ``after_entries`` entries are acked."""

    def __init__(self, harness, after_entries: int, act) -> None:
        self.started = threading.Event()
        self.thread = threading.Thread(target=act)
        acked: list = []

        def count(events):  # runs under the store's lock: act from another thread
            acked.extend(events)
            if len(acked) >= after_entries and not self.started.is_set():
                self.thread.start()
                self.started.set()  # after start(): a waiter may join at once

        harness.server.destinations["example"].store.add_ack_listener(count)


def run_through(harness, strike: Strike) -> None:
    """Run the job until the strike is over and everything fed, delivered again included, is acked."""
    harness.job.start()
    assert strike.started.wait(60), "the strike never came"
    strike.thread.join(timeout=60)
    assert not strike.thread.is_alive(), "the server did not come back"
    harness.wait_acked()
    harness.job.pause()
