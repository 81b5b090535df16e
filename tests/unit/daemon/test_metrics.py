"""The metrics a scrape computes from the jobs."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from canalbridge.daemon.metrics import JobCollector, Metrics
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.model.stats import ConsumerStats, ReceiverStats
from canalbridge.sync.snapshot.progress import SnapshotStatus
from tests.infra.processes import free_port


def fake_job(*statuses: tuple[str, SnapshotStatus], state: JobState = JobState.RUNNING,
             stats: ConsumerStats | None = None, receiver: ReceiverStats | None = None, channels=(),
             committed: dict[str, EntryPosition] | None = None, ack: EntryPosition | None = None) -> SimpleNamespace:
    runner = SimpleNamespace(status=lambda: dict(statuses))
    held = committed or {}
    return SimpleNamespace(name="shop", record=lambda: SimpleNamespace(partitions=()), channels=list(channels),
                           snapshot=runner, stats=stats or ConsumerStats(),
                           receiver_stats=receiver or ReceiverStats(connections_lost=2),
                           acks=SimpleNamespace(position=ack), state=state,
                           committed=SimpleNamespace(get=held.get),
                           settings=SimpleNamespace(commit=SimpleNamespace(interval_seconds=10.0)))


def scrape(*statuses: tuple[str, SnapshotStatus], job: SimpleNamespace | None = None) -> str:
    registry = CollectorRegistry()
    registry.register(JobCollector(lambda: [job or fake_job(*statuses)]))  # type: ignore[list-item]
    return generate_latest(registry).decode()


def sample(text: str, name: str) -> float | None:
    """The value of the sample line starting with ``name`` (labels included), None when there is none."""
    found = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(found[0]) if found else None


def test_the_lag_is_the_age_of_the_oldest_change_that_waits_and_0_on_a_quiet_source():
    now_ms = time.time() * 1000
    quiet = ConsumerStats()
    quiet.routed_first(int(now_ms - 600_000))
    quiet.handed_over()
    quiet.landed(0.5)  # everything routed landed ten minutes ago, and nothing came since
    lag = 'canalbridge_lag_seconds{sync_job="shop"}'
    text = scrape(job=fake_job(stats=quiet, ack=EntryPosition("mysql-bin.000001", 4, int(now_ms - 600_000))))
    assert sample(text, lag) == 0.0
    assert 590 < sample(text, 'canalbridge_newest_change_age_seconds{sync_job="shop"}') < 700  # the data's age
    busy = ConsumerStats()
    busy.routed_first(int(now_ms - 30_000))
    busy.handed_over()  # a commit in flight since 30 s of source time
    busy.routed_first(int(now_ms - 2_000))  # and the next transaction open
    assert 29 < sample(scrape(job=fake_job(stats=busy)), lag) < 60
    assert sample(scrape(job=fake_job(stats=busy, state=JobState.PAUSED)), lag) is None


def test_how_long_since_the_source_last_answered_is_shown_while_the_job_runs():
    heard = ReceiverStats(last_heard=time.monotonic() - 42)
    text = scrape(job=fake_job(receiver=heard))
    assert 41 < sample(text, 'canalbridge_source_last_heard_seconds{sync_job="shop"}') < 60
    assert sample(text, 'canalbridge_commit_interval_seconds{sync_job="shop"}') == 10.0
    assert sample(scrape(job=fake_job(receiver=heard, state=JobState.PAUSED)),
                  'canalbridge_source_last_heard_seconds{sync_job="shop"}') is None


def test_each_channel_shows_its_last_commit_and_the_age_of_the_newest_change_its_target_holds():
    now_ms = time.time() * 1000
    channel = SimpleNamespace(source="shop.orders", entries_received=5, rows_written=4,
                              last_commit_time_ms=int(now_ms) - 3_000)
    text = scrape(job=fake_job(channels=[channel], committed={
        "shop.orders": EntryPosition("mysql-bin.000001", 4, int(now_ms) - 20_000)}))
    labels = '{channel="shop.orders",sync_job="shop"}'
    assert abs(sample(text, f"canalbridge_channel_last_commit_timestamp_seconds{labels}") - (now_ms - 3_000) / 1000) < 1
    assert 19 < sample(text, f"canalbridge_channel_newest_change_age_seconds{labels}") < 40
    assert sample(text, f"canalbridge_channel_rows_written_total{labels}") == 4.0


def test_healthz_answers_200_while_no_job_waits_paused_or_pending_and_503_naming_those_that_do():
    jobs = [fake_job(state=JobState.RUNNING), SimpleNamespace(name="old", state=JobState.CANCELLED)]
    metrics = Metrics(lambda: jobs)  # type: ignore[arg-type,return-value]
    port = free_port()
    metrics.serve("127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as answer:
            assert answer.status == 200
            assert json.loads(answer.read()) == {"healthy": True, "waiting": [],
                                                 "jobs": {"shop": "RUNNING", "old": "CANCELLED"}}
        jobs[0] = fake_job(state=JobState.PAUSED)
        with pytest.raises(urllib.error.HTTPError) as unhealthy:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30)
        assert unhealthy.value.code == 503
        assert json.loads(unhealthy.value.read())["waiting"] == ["shop"]
    finally:
        metrics.stop()


def test_each_snapshotted_table_shows_its_rows_its_estimate_its_rate_and_the_time_left():
    text = scrape(("shop.orders", SnapshotStatus("reading", 3, 300, "300", "1000", 50.0, 400, 1000, 12.0)),
                  ("shop.items", SnapshotStatus("reading", 1, 10, "10", "90", 5.0, 10)))  # a back-fill: no estimate
    for line in ('canalbridge_snapshot_rows{sync_job="shop",table="shop.orders"} 300.0',
                 'canalbridge_snapshot_rows_done{sync_job="shop",table="shop.orders"} 400.0',
                 'canalbridge_snapshot_rows_estimate{sync_job="shop",table="shop.orders"} 1000.0',
                 'canalbridge_snapshot_rows_per_second{sync_job="shop",table="shop.orders"} 50.0',
                 'canalbridge_snapshot_seconds_left{sync_job="shop",table="shop.orders"} 12.0',
                 'canalbridge_snapshot_finished{sync_job="shop",table="shop.orders"} 0.0',
                 'canalbridge_snapshot_rows_done{sync_job="shop",table="shop.items"} 10.0'):
        assert line in text, text
    assert 'canalbridge_snapshot_seconds_left{sync_job="shop",table="shop.items"}' not in text
    assert 'canalbridge_snapshot_rows_estimate{sync_job="shop",table="shop.items"}' not in text


def test_the_connections_to_the_source_that_were_lost_are_counted():
    assert 'canalbridge_source_connections_lost_total{sync_job="shop"} 2.0' in scrape()


def test_the_metrics_endpoint_listens_on_loopback_only_and_takes_no_action():
    metrics = Metrics(lambda: [])
    port = free_port()
    metrics.serve("127.0.0.1", port)
    try:
        assert metrics.address == ("127.0.0.1", port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as scraped:
            assert b"canalbridge_commit_duration_seconds" in scraped.read()
        for method in ("POST", "PUT", "DELETE"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/jobs/shop/stop",
                                                              data=b"{}", method=method), timeout=30)
            assert refused.value.code in (405, 501), method
    finally:
        metrics.stop()


def test_a_scrape_whose_host_header_could_be_a_rebound_name_is_refused():
    metrics = Metrics(lambda: [])
    port = free_port()
    metrics.serve("127.0.0.1", port)

    def scrape_as(host: str) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Host": host})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as refused:
            return refused.code

    try:
        for named in (f"127.0.0.1:{port}", f"localhost:{port}", f"10.1.2.3:{port}", f"[::1]:{port}",
                      f"{socket.gethostname()}:{port}"):
            assert scrape_as(named) == 200, named
        assert scrape_as(f"attacker.example:{port}") == 403
    finally:
        metrics.stop()


def test_the_metrics_page_lists_every_metric_a_scrape_shows_and_no_other():
    now_ms = int(time.time() * 1000)
    stats = ConsumerStats(last_commit_time_ms=now_ms)
    partition = SimpleNamespace(partition=0, committed_offset=5, end_offset=9, lag=4, copies_dropped=0)
    channel = SimpleNamespace(source="shop.orders", entries_received=5, rows_written=4, last_commit_time_ms=now_ms)
    job = fake_job(("shop.orders", SnapshotStatus("reading", 3, 300, "300", "1000", 50.0, 400, 1000, 12.0)),
                   stats=stats, receiver=ReceiverStats(last_heard=time.monotonic()), channels=[channel],
                   committed={"shop.orders": EntryPosition("mysql-bin.000001", 4, now_ms)},
                   ack=EntryPosition("mysql-bin.000001", 4, now_ms))
    job.record = lambda: SimpleNamespace(partitions=(partition,))
    metrics = Metrics(lambda: [job])  # type: ignore[list-item,return-value]
    metrics.commit_seconds.labels("shop").observe(0.3)
    shown = {line.split("{")[0].split(" ")[0] for line in generate_latest(metrics.registry).decode().splitlines()
             if line.startswith("canalbridge_") and not line.split("{")[0].endswith(("_created", "_sum", "_count"))}
    shown = {name.removesuffix("_bucket") for name in shown}
    page = (Path(__file__).resolve().parents[3] / "docs" / "reference" / "metrics.md").read_text()
    assert shown == set(re.findall(r"^\| `(canalbridge_[a-z_]+)` \|", page, re.M))
