"""The shared SparkSession leaves nothing behind that keeps a process alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

# A process that commits with properties (which starts py4j's callback server), then
# stops Spark and ends, or ends with an error before stop_spark(), as a crashing
# daemon or benchmark does.
ENDS = textwrap.dedent("""
    import sys
    from spark_sink.commit_properties import with_commit_properties
    from spark_sink.session import get_spark, stop_spark
    from spark_sink.settings import SparkSettings

    root = sys.argv[1]
    spark = get_spark(SparkSettings(master="local[1]", warehouse=root + "/warehouse", spill_dir=root + "/spill"))
    spark.sql("CREATE TABLE lake.s.t (id int) USING iceberg")
    with_commit_properties(spark, {"canalbridge.job": "j"}, lambda: spark.sql("INSERT INTO lake.s.t VALUES (1)"))
    if sys.argv[2] == "stop":
        stop_spark()
    raise SystemExit("the main thread ended")
""")


@pytest.mark.parametrize("stops", ["stop", "crash"])
def test_a_process_exits_when_its_main_thread_ends_with_or_without_stop_spark(tmp_path, stops):
    process = subprocess.Popen([sys.executable, "-c", ENDS, str(tmp_path), stops],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        output = b""
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # the Python process and its Spark JVM
            process.wait(30)
    text = output.decode(errors="replace")
    assert "the main thread ended" in text, f"the process hung after its main thread ended\n{text[-3000:]}"
    assert process.returncode == 1, text[-3000:]


def test_the_driver_jvm_runs_with_the_explicit_heap(spark):
    # spark.driver.memory only counts when it reaches the JVM's launch: the heap must be 2g, not Spark's 1g.
    max_heap = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()
    assert 1.5 * 2**30 < max_heap <= 2 * 2**30
