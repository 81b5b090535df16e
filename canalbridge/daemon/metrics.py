"""Prometheus metrics, read from the jobs when scraped (nothing on the hot path)."""

from __future__ import annotations

import ipaddress
import json
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
UNHEALTHY = (JobState.PAUSED.value, JobState.PENDING.value)  # states a person or a start must get out of
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
# The job's label. Not ``job``: Prometheus gives every series it scrapes a ``job`` label of its own (the scrape's),
# and renames a target's ``job`` label to ``exported_job``.
JOB = "sync_job"


class JobCollector(Collector):
    """Counters and gauges of every job, computed at scrape time."""

    def __init__(self, jobs: Callable[[], Iterable[SyncJob]]) -> None:
        self._jobs = jobs

    def collect(self):  # type: ignore[no-untyped-def]
        received = CounterMetricFamily("canalbridge_channel_entries_received", "Row entries routed to a channel",
                                       labels=[JOB, "channel"])
        written = CounterMetricFamily("canalbridge_channel_rows_written", "Rows committed to a channel's target",
                                      labels=[JOB, "channel"])
        snapshot_rows = GaugeMetricFamily("canalbridge_snapshot_rows", "Rows a table's snapshot landed in this run",
                                          labels=[JOB, "table"])
        snapshot_done = GaugeMetricFamily("canalbridge_snapshot_finished",
                                          "1 once a table's snapshot finished, 0 while it runs", labels=[JOB, "table"])
        snapshot_gauges = _gauges("canalbridge_snapshot_", "table", (
            ("rows_done", "Rows a table's snapshot landed, over all its runs"),
            ("rows_estimate", "The source's estimate of the table's rows"),
            ("rows_per_second", "Rows a table's snapshot lands per second in this run"),
            ("seconds_left", "The rows estimated left, at this run's rate")))
        counters = {name: CounterMetricFamily(f"canalbridge_{name}", help_text, labels=[JOB]) for name, help_text in (
            ("batches", "Canal batches taken"), ("commits", "Transactions committed"),
            ("rollbacks", "Transactions rolled back"), ("retries", "Retries after a failed transaction"))}
        lost = CounterMetricFamily("canalbridge_source_connections_lost",
                                   "Times the connection to Canal or Kafka failed mid-conversation (then reopened)",
                                   labels=[JOB])
        job_gauges = _gauges("canalbridge_", None, (
            ("lag_seconds", "Age of the oldest source change received and not yet in every target (0: none "
                            "waits); while the job runs"),
            ("newest_change_age_seconds", "Now minus the execute time of the newest source change every target "
                                          "holds (the ack position); grows on a quiet source"),
            ("source_last_heard_seconds", "Seconds since Canal or Kafka last answered a get or poll, an empty one "
                                          "too; while the job runs"),
            ("last_commit_timestamp_seconds", "When a commit last landed on every channel (Unix time)"),
            ("commit_interval_seconds", "The job's [job.commit] interval_seconds")))
        channel_gauges = _gauges("canalbridge_channel_", "channel", (
            ("last_commit_timestamp_seconds", "When a commit last landed in the channel's target, in this run "
                                              "(Unix time)"),
            ("newest_change_age_seconds", "Now minus the execute time of the newest source change the channel's "
                                          "target holds")))
        state = GaugeMetricFamily("canalbridge_job_state", "1 for the job's current state", labels=[JOB, "state"])
        kafka = _gauges("canalbridge_kafka_", "partition", (
            ("committed_offset", "The offset committed for the job's group, per partition"),
            ("end_offset", "The partition's end offset when last read"),
            ("lag_messages", "Messages in the partition after the committed offset")))
        copies = CounterMetricFamily("canalbridge_kafka_copies_dropped", "Entries Canal sent twice, dropped",
                                     labels=[JOB, "partition"])
        now_ms, now_monotonic = time.time() * 1000, time.monotonic()
        for job in self._jobs():
            running = job.state is JobState.RUNNING
            for partition in job.record().partitions:
                labels = [job.name, str(partition.partition)]
                for name, value in (("committed_offset", partition.committed_offset),
                                    ("end_offset", partition.end_offset), ("lag_messages", partition.lag)):
                    if value is not None:
                        kafka[name].add_metric(labels, value)
                copies.add_metric(labels, partition.copies_dropped)
            for channel in job.channels:
                labels = [job.name, channel.source]
                received.add_metric(labels, channel.entries_received)
                written.add_metric(labels, channel.rows_written)
                if channel.last_commit_time_ms is not None:
                    channel_gauges["last_commit_timestamp_seconds"].add_metric(labels,
                                                                               channel.last_commit_time_ms / 1000)
                held = job.committed.get(channel.source)
                if held is not None and held.execute_time_ms:
                    channel_gauges["newest_change_age_seconds"].add_metric(
                        labels, max(now_ms - held.execute_time_ms, 0) / 1000)
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
                job_gauges["newest_change_age_seconds"].add_metric([job.name], max(now_ms - ack.execute_time_ms, 0)
                                                                   / 1000)
            if running:  # (a paused job's counters of what waited are those of its last run)
                waiting = stats.waiting_since_ms()
                job_gauges["lag_seconds"].add_metric(
                    [job.name], 0.0 if waiting is None else max(now_ms - waiting, 0) / 1000)
                heard = job.receiver_stats.last_heard
                if heard is not None:
                    job_gauges["source_last_heard_seconds"].add_metric([job.name], now_monotonic - heard)
            if stats.last_commit_time_ms is not None:
                job_gauges["last_commit_timestamp_seconds"].add_metric([job.name], stats.last_commit_time_ms / 1000)
            job_gauges["commit_interval_seconds"].add_metric([job.name], job.settings.commit.interval_seconds)
            for candidate in JobState:
                state.add_metric([job.name, candidate.value], 1.0 if job.state is candidate else 0.0)
        yield from (received, written, *channel_gauges.values(), *counters.values(), lost, *job_gauges.values(), state,
                    *kafka.values(), copies, snapshot_rows, snapshot_done, *snapshot_gauges.values())


class Metrics:
    """The registry, the commit-duration histogram, and the HTTP endpoint."""

    def __init__(self, jobs: Callable[[], Iterable[SyncJob]]) -> None:
        self._jobs = jobs
        self.registry = CollectorRegistry()
        self.registry.register(JobCollector(jobs))
        self.commit_seconds = Histogram("canalbridge_commit_duration_seconds", "Duration of a transaction commit",
                                        [JOB], buckets=COMMIT_BUCKETS, registry=self.registry)
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
        """Serve ``/metrics`` and ``/healthz`` on ``host:port``, refusing a request whose ``Host`` could be a rebound
        name."""
        app = host_checked(with_health(make_wsgi_app(self.registry), self._jobs), allowed_hosts(host))
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


def _gauges(prefix: str, label: str | None, named: tuple[tuple[str, str], ...]) -> dict[str, GaugeMetricFamily]:
    """A gauge family per (name, help) pair, labelled by the job and ``label``."""
    labels = [JOB] if label is None else [JOB, label]
    return {name: GaugeMetricFamily(prefix + name, help_text, labels=labels) for name, help_text in named}


def with_health(app: WSGIApp, jobs: Callable[[], Iterable[SyncJob]]) -> WSGIApp:
    """``app``, with ``/healthz`` answered first: 200 when no job waits PAUSED or PENDING, else 503; the body
    names each job's state (JSON). A cancelled or finished job ended as asked: it does not make the daemon
    unhealthy."""

    def answered(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/healthz":
            return app(environ, start_response)
        states = {job.name: job.state.value for job in jobs()}
        waiting = sorted(name for name, state in states.items() if state in UNHEALTHY)
        body = json.dumps({"healthy": not waiting, "waiting": waiting, "jobs": states}, sort_keys=True)
        start_response("503 Service Unavailable" if waiting else "200 OK",
                       [("Content-Type", "application/json"), ("Cache-Control", "no-store")])
        return [body.encode() + b"\n"]

    return answered


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
