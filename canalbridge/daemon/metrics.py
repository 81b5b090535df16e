"""Prometheus metrics, read from the jobs when scraped (nothing on the hot path)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from canalbridge.daemon.control_access import LOOPBACK_HOSTS, host_name
from canalbridge.sync.job.job import JobState, SyncJob

COMMIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
JOIN_TIMEOUT_S = 10.0  # the server thread ends once shutdown() returns
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class JobCollector(Collector):
    """Counters and gauges of every job, computed at scrape time."""

    def __init__(self, jobs: Callable[[], Iterable[SyncJob]]) -> None:
        self._jobs = jobs

    def collect(self):  # type: ignore[no-untyped-def]
        received = CounterMetricFamily("canalbridge_channel_entries_received", "Row entries routed to a channel",
                                       labels=["job", "channel"])
        written = CounterMetricFamily("canalbridge_channel_rows_written", "Rows committed to a channel's target",
                                      labels=["job", "channel"])
        snapshot_rows = GaugeMetricFamily("canalbridge_snapshot_rows", "Rows a table's snapshot landed in this run",
                                          labels=["job", "table"])
        snapshot_done = GaugeMetricFamily("canalbridge_snapshot_finished",
                                          "1 once a table's snapshot finished, 0 while it runs",
                                          labels=["job", "table"])
        snapshot_gauges = {name: GaugeMetricFamily(f"canalbridge_snapshot_{name}", help_text, labels=["job", "table"])
                           for name, help_text in (
                               ("rows_done", "Rows a table's snapshot landed, over all its runs"),
                               ("rows_estimate", "The source's estimate of the table's rows"),
                               ("rows_per_second", "Rows a table's snapshot lands per second in this run"),
                               ("seconds_left", "The rows estimated left, at this run's rate"))}
        counters = {name: CounterMetricFamily(f"canalbridge_{name}", help_text, labels=["job"]) for name, help_text in (
            ("batches", "Canal batches taken"), ("commits", "Transactions committed"),
            ("rollbacks", "Transactions rolled back"), ("retries", "Retries after a failed transaction"))}
        lost = CounterMetricFamily("canalbridge_source_connections_lost",
                                   "Times the connection to Canal or Kafka failed mid-conversation (then reopened)",
                                   labels=["job"])
        lag = GaugeMetricFamily("canalbridge_lag_seconds", "Now minus the execute time of the ack position",
                                labels=["job"])
        state = GaugeMetricFamily("canalbridge_job_state", "1 for the job's current state", labels=["job", "state"])
        kafka = {name: GaugeMetricFamily(f"canalbridge_kafka_{name}", help_text, labels=["job", "partition"])
                 for name, help_text in (
                     ("committed_offset", "The offset committed for the job's group, per partition"),
                     ("end_offset", "The partition's end offset when last read"),
                     ("lag_messages", "Messages in the partition after the committed offset"))}
        copies = CounterMetricFamily("canalbridge_kafka_copies_dropped", "Entries Canal sent twice, dropped",
                                     labels=["job", "partition"])
        now_ms = time.time() * 1000
        for job in self._jobs():
            for partition in job.record().partitions:
                labels = [job.name, str(partition.partition)]
                for name, value in (("committed_offset", partition.committed_offset),
                                    ("end_offset", partition.end_offset), ("lag_messages", partition.lag)):
                    if value is not None:
                        kafka[name].add_metric(labels, value)
                copies.add_metric(labels, partition.copies_dropped)
            for channel in job.channels:
                received.add_metric([job.name, channel.source], channel.entries_received)
                written.add_metric([job.name, channel.source], channel.rows_written)
            runner = job.snapshot
            for table, status in (runner.status() if runner is not None else {}).items():
                snapshot_rows.add_metric([job.name, table], status.rows)
                snapshot_done.add_metric([job.name, table], 1 if status.phase == "finished" else 0)
                for field_name, gauge in snapshot_gauges.items():
                    value = getattr(status, field_name)
                    if value is not None:  # (no estimate for a back-fill; no rate before the first chunk)
                        gauge.add_metric([job.name, table], value)
            stats = job.stats
            for name, family in counters.items():
                family.add_metric([job.name], getattr(stats, name))
            lost.add_metric([job.name], job.receiver_stats.connections_lost)
            ack = job.acks.position
            if ack is not None and ack.execute_time_ms:
                lag.add_metric([job.name], max(now_ms - ack.execute_time_ms, 0) / 1000)
            for candidate in JobState:
                state.add_metric([job.name, candidate.value], 1.0 if job.state is candidate else 0.0)
        yield from (received, written, *counters.values(), lost, lag, state, *kafka.values(), copies, snapshot_rows,
                    snapshot_done, *snapshot_gauges.values())


class Metrics:
    """The registry, the commit-duration histogram, and the HTTP endpoint."""

    def __init__(self, jobs: Callable[[], Iterable[SyncJob]]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(JobCollector(jobs))
        self.commit_seconds = Histogram("canalbridge_commit_duration_seconds", "Duration of a transaction commit",
                                        ["job"], buckets=COMMIT_BUCKETS, registry=self.registry)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def observe_commit(self, job: SyncJob) -> None:
        self.commit_seconds.labels(job.name).observe(job.stats.last_commit_seconds)

    @property
    def address(self) -> tuple[str, int] | None:
        """Where ``/metrics`` listens, once served."""
        if self._server is None:
            return None
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port``, refusing a request whose ``Host`` could be a rebound name."""
        app = host_checked(make_wsgi_app(self.registry), allowed_hosts(host))
        self._server = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT_S)
            self._thread = None


def allowed_hosts(bound: str) -> frozenset[str]:
    """The names a ``Host`` header may give besides an address: loopback, this host's, and ``bound``'s."""
    return LOOPBACK_HOSTS | {bound.lower(), socket.gethostname().lower(), socket.getfqdn().lower()}


def host_checked(app: WSGIApp, allowed: frozenset[str]) -> WSGIApp:
    """``app``, for requests whose ``Host`` is an address or one of ``allowed``; else 403.

    A web page that rebinds its own DNS name to this host sends that name;
    a scraper names the host's address or name.
    """

    def checked(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        host = host_name(environ.get("HTTP_HOST"))
        if host is not None and (host in allowed or _is_address(host)):
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"the Host header must name this host (its address or name, or [daemon] metrics_host)\n"]

    return checked


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # one line per scrape is noise, not an event
        pass
