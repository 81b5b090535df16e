"""The benchmark scripts run from a fresh clone and print a final JSON line (tiny sizes: figures not checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from canalbridge.devkit.progress import die_with_parent

REPO = Path(__file__).resolve().parents[3]


def run_bench(module: str, *args: str) -> list[dict]:
    result = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                            timeout=840, preexec_fn=die_with_parent)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_decode_bench_drains_exactly_and_compares_with_both_references():
    *contenders, summary = run_bench("bench.decode", "--rows", "3000", "--runs", "1")
    assert summary["benchmark"] == "decode" and summary["exact"] is True
    assert set(summary["rows_per_s"]) == {"canalbridge", "canalbridge_staging", "protobuf_ceiling", "canal-python",
                                          "python_routing", "jvm_decode"}
    assert all(c["rows"] == summary["rows"] for c in contenders)
    (staging,) = [c for c in contenders if c["contender"] == "canalbridge_staging"]
    assert staging["staged"] >= staging["rows"] / 10  # every entry staged (a rows event of 10 rows is one)
    assert summary["staging_python_cpu_us_per_entry"] > 0
    (jvm,) = [c for c in contenders if c["contender"] == "jvm_decode"]
    assert jvm["changes"] >= jvm["rows"]  # an UPDATE that changes its key is two changes
    assert summary["python_routing_cpu_us_per_row"] > 0 and summary["jvm_decode_cpu_us_per_row"] > 0


@pytest.mark.spark
@pytest.mark.real
@pytest.mark.cluster
@pytest.mark.timeout(900)  # the local runs, Nessie's, then a cluster, S3Proxy, a MariaDB and a second driver
def test_end_to_end_bench_reports_throughput_lag_what_cuts_and_atomic_commits_cost_and_what_a_cluster_adds():
    backlog, live, warm, with_cuts, plain, atomic, remote, summary = run_bench(
        "bench.end_to_end", "--rows", "3000", "--interval", "1", "--rate", "3000", "--cuts", "0.5", "--atomic",
        "--cluster")
    runs = (backlog, live, warm, with_cuts, plain, atomic, remote)
    assert len({each["rows_committed"] for each in runs}) == 1 and backlog["rows_committed"] > 0
    assert all(each["table_rows"] == backlog["table_rows"] for each in runs)
    # The run with cuts published some, and the summary holds their cost beside the warm run without.
    assert (warm["run"], with_cuts["run"]) == ("backlog_warm", "backlog_cuts") and with_cuts["cuts_published"] >= 1
    assert summary["cuts_published"] == with_cuts["cuts_published"] and summary["cut_publish_s_p50"] > 0
    assert summary["cuts_rows_per_s"] == with_cuts["rows_per_s"] > 0 and summary["warm_rows_per_s"] > 0
    # Into Nessie, without and with atomic commits: every commit of the atomic run was one catalog commit.
    assert (plain["run"], atomic["run"]) == ("nessie_plain", "nessie_atomic") and "catalog_publishes" not in plain
    assert atomic["catalog_publishes"] == atomic["commits"] > 0 and summary["atomic_publish_s_p50"] > 0
    assert summary["nessie_atomic_rows_per_s"] == atomic["rows_per_s"] > 0
    assert 0 <= summary["lag_p50_s"] <= summary["lag_p99_s"]
    assert summary["backlog_python_cpu_us_per_row"] == backlog["python_cpu_us_per_row"] > 0
    assert summary["backlog_jvm_cpu_us_per_row"] == backlog["jvm_cpu_us_per_row"] > 0
    assert summary["backlog_devserver_cpu_us_per_row"] == backlog["devserver_cpu_us_per_row"] > 0
    # The cluster's run: every table committed into the bucket, through the catalog, by the executors.
    assert remote["run"] == "cluster" and remote["table_commits"] >= 3 and remote["store_objects"] > 0
    assert summary["cluster_rows_per_s"] == remote["rows_per_s"] > 0
    assert summary["catalog_statements_per_table_commit"] > 0 and summary["store_objects_per_table_commit"] > 0
    assert summary["cluster_executor_cpu_us_per_row"] > 0


@pytest.mark.spark
def test_sustained_bench_reports_each_tenth_and_the_tables_at_the_end():
    *_, summary = run_bench("bench.sustained", "--rows", "3000", "--interval", "1", "--maintenance-minutes", "0.01")
    assert summary["rows_committed"] > 0 and len(summary["rows_per_s_by_tenth"]) == 10
    assert all(table["rows"] > 0 for table in summary["tables"].values())
    assert all(table["data_files"] > 0 for table in summary["tables"].values())


@pytest.mark.spark
def test_scaling_bench_reports_tables_and_memory():
    *_, summary = run_bench("bench.scaling", "--tables", "1,3", "--total-rows", "3000", "--repeat", "1",
                            "--memory-seconds", "6", "--memory-rows", "3000")
    assert set(summary["commit_s_by_tables"]) == {"1", "3"}
    assert summary["memory"]["python_rss_mb_max_second_half"] > 0


@pytest.mark.spark
@pytest.mark.real
def test_real_stack_bench_drains_mariadb_through_canal_and_checks_the_targets():
    backlog, live, summary = run_bench("bench.real_stack", "--rows", "2000", "--interval", "1", "--rate", "1000",
                                       "--no-dev-server")
    assert backlog["rows"] == live["rows"] == backlog["rows_committed"] == live["rows_committed"] == 2000
    assert summary["targets_match_mariadb"] is True
    assert sum(backlog["table_rows"].values()) == 1200 - 200  # 60% inserts, 10% deletes
    assert 0 < summary["lag_p50_s"] <= summary["lag_p99_s"]  # a commit takes time
    assert backlog["python_cpu_us_per_row"] > 0 and live["python_cpu_us_per_row"] > 0


@pytest.mark.spark
@pytest.mark.real
@pytest.mark.flink
def test_peers_bench_replays_one_binlog_through_flink_cdc_canalbridge_and_canals_recorded_stream():
    # canalbridge by the equality-delete path: the one run of it through the real Canal and MariaDB.
    flink, canalbridge, recorded, load, flink_readers, canalbridge_readers, summary = run_bench(
        "bench.peers", "--rows", "2000", "--interval", "1", "--upsert-deletes", "equality", "--no-warm",
        "--load-rows", "3000")
    assert [run["pipeline"] for run in (flink, canalbridge, recorded)] == ["flink", "canalbridge", "recorded"]
    assert flink["rows"] == canalbridge["rows"] == recorded["rows"] == 2003  # and a sentinel row in each table
    for name in ("flink", "canalbridge", "recorded"):
        assert summary[f"{name}_targets_match_mariadb"] is True, name
        assert summary[f"{name}_rows_per_s"] > 0 and summary[f"{name}_bridge_cpu_us_per_row"] > 0
    assert flink["cpu_us_per_row"]["flink_jvm"] > 0
    assert all(figure > 0 for figure in canalbridge["cpu_us_per_row"].values())
    assert summary["recorded_rate_vs_flink"] > 0 and isinstance(summary["target_rate_vs_flink_met"], bool)
    assert "warm" not in recorded and summary["upsert_deletes"] == "equality"
    assert flink["pipeline_cpu_us_per_row"] == flink["bridge_cpu_us_per_row"]  # its JVM reads the binlog itself
    assert canalbridge["pipeline_cpu_us_per_row"] > canalbridge["bridge_cpu_us_per_row"]  # Canal's JVM besides
    for readers in (flink_readers["readers"], canalbridge_readers["readers"]):
        assert readers["before_compaction"]["data_files"] > 0 and readers["after_compaction"]["scan_s"] > 0
    # Both sinks write an equality delete for every upserted key, and canalbridge no position delete.
    assert flink_readers["readers"]["before_compaction"]["equality_delete_files"] > 0
    assert canalbridge_readers["readers"]["before_compaction"]["equality_delete_files"] > 0
    assert canalbridge_readers["readers"]["before_compaction"]["position_delete_files"] == 0
    # The initial load: one preloaded table read by the client, then snapshotted by each, each target checked.
    assert load["pipeline"] == "load" and load["rows"] == summary["load_rows"] == 3000
    assert load["mariadb_client_rows_per_s"] > 0
    for name in ("flink", "canalbridge"):
        assert load[name]["target_matches_mariadb"] is True, name
        assert load[name]["rows_per_s"] > 0 and load[name]["bridge_cpu_us_per_row"] > 0
    assert load["flink"]["peak_jvm_rss_mb"] > 0
    for peaks in (load["canalbridge"]["peak_jvm_rss_mb"], canalbridge["peak_jvm_rss_mb"]):
        assert set(peaks) == {"spark_jvm", "canal_jvm"} and all(mb > 0 for mb in peaks.values())
    assert summary["load_canalbridge_vs_flink"] > 0 and isinstance(summary["target_load_vs_flink_met"], bool)


@pytest.mark.spark
def test_target_size_bench_commits_exactly_into_each_size_by_both_write_paths():
    # One size: the ratio between sizes is arithmetic on the same figures.
    *runs, summary = run_bench("bench.target_size", "--sizes", "2000", "--changes", "500", "--commits", "1")
    assert summary["exact"] is True
    for path in ("position", "equality"):
        assert set(summary[path]["median_commit_s_by_table_rows"]) == {"2000"}
        assert summary[path]["largest_over_smallest"] > 0
    sizes = [run for run in runs if "readers" in run]
    assert [(run["upsert_deletes"], run["table_rows"]) for run in sizes] == [("position", 2000), ("equality", 2000)]
    for run in sizes:
        before, after = run["readers"]["before_compaction"], run["readers"]["after_compaction"]
        assert run["median_spark_jvm_cpu_us_per_change"] > 0 and before["scan_s"] > 0
        deletes = "equality_delete_files" if run["upsert_deletes"] == "equality" else "position_delete_files"
        assert before[deletes] > 0 and after["equality_delete_files"] == 0, run


@pytest.mark.spark
@pytest.mark.kafka
def test_kafka_bench_reports_both_formats_backlog_and_lag():
    *runs, summary = run_bench("bench.kafka", "--rows", "3000", "--interval", "1", "--rate", "3000")
    assert [run["run"] for run in runs] == ["protobuf_backlog", "protobuf_live", "flat_backlog", "flat_live"]
    assert all(run["rows_committed"] > 0 for run in runs)
    assert summary["protobuf_exact"] is True and summary["flat_exact"] is True
    assert runs[0]["table_rows"] == runs[2]["table_rows"]
    for record_format in ("protobuf", "flat"):
        assert summary[f"{record_format}_backlog_rows_per_s"] > 0
        assert summary[f"{record_format}_backlog_broker_cpu_us_per_row"] >= 0
        assert 0 <= summary[f"{record_format}_lag_p50_s"] <= summary[f"{record_format}_lag_p99_s"]
