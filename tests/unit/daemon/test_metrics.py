"""The metrics a scrape computes from the jobs."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from canalbridge.daemon.metrics import JobCollector, Metrics
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.stats import ConsumerStats, ReceiverStats
from canalbridge.sync.snapshot.progress import SnapshotStatus
from tests.infra.processes import free_port


def scrape(*statuses: tuple[str, SnapshotStatus]) -> str:
    runner = SimpleNamespace(status=lambda: dict(statuses))
    job = SimpleNamespace(name="shop", record=lambda: SimpleNamespace(partitions=()), channels=[], snapshot=runner,
                          stats=ConsumerStats(), receiver_stats=ReceiverStats(connections_lost=2),
                          acks=SimpleNamespace(position=None), state=JobState.RUNNING)
    registry = CollectorRegistry()
    registry.register(JobCollector(lambda: [job]))  # type: ignore[list-item]
    return generate_latest(registry).decode()


def test_each_snapshotted_table_shows_its_rows_its_estimate_its_rate_and_the_time_left():
    text = scrape(("shop.orders", SnapshotStatus("reading", 3, 300, "300", "1000", 50.0, 400, 1000, 12.0)),
                  ("shop.items", SnapshotStatus("reading", 1, 10, "10", "90", 5.0, 10)))  # a back-fill: no estimate
    for line in ('canalbridge_snapshot_rows{job="shop",table="shop.orders"} 300.0',
                 'canalbridge_snapshot_rows_done{job="shop",table="shop.orders"} 400.0',
                 'canalbridge_snapshot_rows_estimate{job="shop",table="shop.orders"} 1000.0',
                 'canalbridge_snapshot_rows_per_second{job="shop",table="shop.orders"} 50.0',
                 'canalbridge_snapshot_seconds_left{job="shop",table="shop.orders"} 12.0',
                 'canalbridge_snapshot_finished{job="shop",table="shop.orders"} 0.0',
                 'canalbridge_snapshot_rows_done{job="shop",table="shop.items"} 10.0'):
        assert line in text, text
    assert 'canalbridge_snapshot_seconds_left{job="shop",table="shop.items"}' not in text
    assert 'canalbridge_snapshot_rows_estimate{job="shop",table="shop.items"}' not in text


def test_the_connections_to_the_source_that_were_lost_are_counted():
    assert 'canalbridge_source_connections_lost_total{job="shop"} 2.0' in scrape()


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
