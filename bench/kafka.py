"""Canal's Kafka mode: row changes/s from a Kafka topic into 3 Iceberg tables (Spark local[2]), and the lag.

The workload of ``bench.end_to_end`` (3 ten-column tables, 60% inserts / 30%
updates / 10% deletes, generated once and cached) is published into a topic
of a private Kafka 3.9 broker as Canal 1.1.7 writes it
(``tests.infra.kafka_feed``): protobuf records of ``--batch-entries``
entries (one Canal batch each), or flat messages (one per rows entry). For
each ``--formats``:

1. backlog: the whole workload waits in the topic; the figure is row
   changes/s from job start until every offset is committed;
2. live: a publisher process (standing in for Canal) releases the workload at
   ``--rate`` row changes/s (default: 80% of that format's backlog figure)
   and stamps each entry with the time it released it; the figure is the lag
   from then to the commit that made the row visible, p50 and p99.

Prints one JSON line per run, then a summary line with the TCP figure's
command for comparison.

    .venv/bin/python -m bench.kafka --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from bench.common import (
    LagRecorder,
    add_commit_arguments,
    bench_tables,
    commit_settings,
    cpu_seconds,
    local_spark_settings,
    rss_mb,
    run_result,
    spark_pid,
    workload_file,
)
from canalbridge.daemon.logs import configure_logging
from canalbridge.devkit.entry_file import read_entries
from canalbridge.devkit.feeds import rows_in
from canalbridge.devkit.progress import lag_text
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from canalbridge.sync.source.kafka.settings import KafkaSettings
from spark_sink.session import get_spark, stop_spark
from spark_sink.settings import SparkSettings
from spark_sink.sink import make_sink
from tests.infra.kafka_broker import KafkaBroker
from tests.infra.kafka_feed import flat_message, protobuf_records

PUBLISH_CHUNK = 2000  # records handed to the producer between flushes


def records(path: Path, record_format: str, batch_entries: int, stamp: bool = False) -> Iterator[tuple[bytes, int]]:
    """The file's entries as Canal's record values, each with the row changes it carries.

    With ``stamp``, each entry's execute time is the moment its record is made
    (the live run's stand-in for the time MySQL ran it).
    """
    batch: list[entry_pb.Entry] = []
    rows = 0
    for entry in read_entries(path):
        if stamp:
            entry.header.executeTime = int(time.time() * 1000)
        carried = rows_in(entry)
        if record_format == "flat":
            if entry.entryType == entry_pb.EntryType.ROWDATA:
                yield json.dumps(flat_message(entry), ensure_ascii=False).encode("utf-8"), carried
            continue
        batch.append(entry)
        rows += carried
        if len(batch) == batch_entries:
            yield protobuf_records(batch, batch_entries)[0], rows
            batch, rows = [], 0
    if batch:
        yield protobuf_records(batch, batch_entries)[0], rows


def publish(bootstrap: str, topic: str, path: Path, record_format: str, batch_entries: int, rate: float = 0) -> int:
    """Publish the file into partition 0 (at ``rate`` row changes/s, stamped, or all at once); the end offset."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=1 << 20,
                             max_request_size=16 << 20)
    started, sent_rows, count = time.perf_counter(), 0, 0
    pace = threading.Event()  # never set: paces the live release
    try:
        for value, rows in records(path, record_format, batch_entries, stamp=bool(rate)):
            if rate:
                ahead = sent_rows / rate - (time.perf_counter() - started)
                if ahead > 0:
                    pace.wait(ahead)
            producer.send(topic, value=value, partition=0)
            sent_rows += rows
            count += 1
            if count % PUBLISH_CHUNK == 0 and not rate:
                producer.flush()
        producer.flush()
        return count
    finally:
        producer.close()


def _publish_live(bootstrap: str, topic: str, path: str, record_format: str, batch_entries: int,
                  rate: float) -> None:
    configure_logging("warning")
    publish(bootstrap, topic, Path(path), record_format, batch_entries, rate)


def count_records(path: Path, record_format: str, batch_entries: int) -> int:
    entries = rows_entries = 0
    for entry in read_entries(path):
        entries += 1
        rows_entries += entry.entryType == entry_pb.EntryType.ROWDATA
    return rows_entries if record_format == "flat" else -(-entries // batch_entries)


def run(name: str, broker: KafkaBroker, topic: str, end: int, rows: int, spark_settings: SparkSettings,
        commit: CommitSettings, record_format: str, *, rate: float = 0, live: tuple[str, int] | None = None) -> dict:
    """One job over the topic into fresh tables ``lake.NAME.*`` until offset ``end`` is committed."""
    spark = get_spark(spark_settings)
    tables = bench_tables(3)
    lags: Counter = Counter()
    lock = threading.Lock()

    def sink(channel: ChannelSettings) -> ChannelSink:
        return LagRecorder(make_sink(spark, channel, name, spark_settings), lags, lock).sink

    kafka = KafkaSettings((broker.bootstrap,), topic, f"bench-{name}", record_format=record_format,
                          transaction_markers=record_format == "protobuf", poll_timeout_ms=200)
    channels = tuple(ChannelSettings(t.qualified, f"lake.{name}.{t.name}") for t in tables)
    job = SyncJob(JobSettings(name, kafka, channels, commit), sink)
    publisher = None
    if live is not None:
        context = multiprocessing.get_context("spawn")
        publisher = context.Process(target=_publish_live, args=(broker.bootstrap, topic, live[0], record_format,
                                                                live[1], rate))
    jvm = spark_pid(spark)
    started, cpu_started, jvm_started = time.perf_counter(), time.process_time(), cpu_seconds(jvm)
    broker_started = cpu_seconds(broker.pid or 0)
    if publisher is not None:
        publisher.start()
    job.start()
    peak_rss, last_report, rows_then = 0.0, started, 0
    pace = threading.Event()  # never set: paces the progress poll
    while True:
        committed = {p.partition: p.committed_offset or 0 for p in job.record().partitions}
        if committed.get(0, 0) >= end:
            break
        pace.wait(0.5)
        peak_rss = max(peak_rss, rss_mb())
        now = time.perf_counter()
        if job.fail_message is not None or now - started > 3600:
            raise SystemExit(f"{name}: not drained: {job.state} {job.fail_message}")
        if now - last_report >= 5.0:
            done = sum(lags.values())  # (rows is the run's total)
            print(f"{name}: [{now - started:5.0f}s] {done:,} row changes committed in {job.stats.commits} commits "
                  f"({(done - rows_then) / (now - last_report):,.0f}/s), lag {lag_text(job)}, "
                  f"offset {committed.get(0, 0):,} of {end:,}", flush=True)
            last_report, rows_then = now, done
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    jvm_cpu, broker_cpu = cpu_seconds(jvm) - jvm_started, cpu_seconds(broker.pid or 0) - broker_started
    job.pause()
    if publisher is not None:
        publisher.join(60)
    result = run_result(name, rows, elapsed, job, lags, peak_rss, rate, cpu_s=cpu, jvm_cpu_s=jvm_cpu)
    result["format"] = record_format
    result["broker_cpu_us_per_row"] = round(broker_cpu / rows * 1e6, 2)
    result["table_rows"] = {t.name: spark.table(f"lake.{name}.{t.name}").count() for t in tables}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rows-per-event", type=int, default=10)
    parser.add_argument("--formats", default="protobuf,flat", help="comma-separated: protobuf, flat")
    parser.add_argument("--batch-entries", type=int, default=50, help="entries per protobuf record (a Canal batch)")
    add_commit_arguments(parser)
    args = parser.parse_args()
    configure_logging("warning")

    path, rows, _ = workload_file("e2e", bench_tables(3), args.rows, rows_per_event=args.rows_per_event)
    root = Path(tempfile.mkdtemp(prefix="canalbridge-bench-kafka-"))
    spark_settings = local_spark_settings(root, args.decoder, args.upsert_deletes)
    commit = commit_settings(args, store_capacity=65536, store_batch_mode="ITEMSIZE")  # no store: Kafka keeps it
    summary: dict[str, object] = {"benchmark": "kafka", "rows": rows, "tables": 3, "decoder": args.decoder,
                                  "commit_interval_s": args.interval, "min_events": args.min_events,
                                  "min_mb": args.min_mb, "max_mb": args.max_mb, "batch_entries": args.batch_entries}
    with KafkaBroker(root / "kafka", heap="1g") as broker:
        for record_format in args.formats.split(","):
            end = count_records(path, record_format, args.batch_entries)
            topic = f"backlog-{record_format}"
            broker.create_topic(topic)
            print(f"publishing {rows:,} row changes as {end:,} {record_format} records", flush=True)
            started = time.perf_counter()
            publish(broker.bootstrap, topic, path, record_format, args.batch_entries)
            published_s = time.perf_counter() - started
            backlog = run(f"{record_format}_backlog", broker, topic, end, rows, spark_settings, commit, record_format)
            backlog["publish_seconds"] = round(published_s, 1)
            print(json.dumps(backlog), flush=True)
            rate = args.rate or 0.8 * int(str(backlog["rows_per_s"]))
            topic = f"live-{record_format}"
            broker.create_topic(topic)
            live = run(f"{record_format}_live", broker, topic, end, rows, spark_settings, commit, record_format,
                       rate=rate, live=(str(path), args.batch_entries))
            print(json.dumps(live), flush=True)
            for key in ("rows_per_s", "python_cpu_us_per_row", "jvm_cpu_us_per_row", "broker_cpu_us_per_row"):
                summary[f"{record_format}_backlog_{key}"] = backlog[key]
            summary[f"{record_format}_live_rate"] = live.get("rate")
            summary[f"{record_format}_lag_p50_s"], summary[f"{record_format}_lag_p99_s"] = (
                live["lag_p50_s"], live["lag_p99_s"])
            summary[f"{record_format}_exact"] = backlog["table_rows"] == live["table_rows"]
    stop_spark()
    summary["tcp_figure"] = "bench.end_to_end --rows 2000000 (docs/performance.md#end-to-end)"
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
