"""The Spark conf the daemon starts its session with: its defaults, and the user's keys over them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from spark_sink import classpath
from spark_sink.session import session_conf
from spark_sink.settings import SparkSettings

LOCAL = SparkSettings(master="local[2]", warehouse="/w", spill_dir="/s")
CLUSTER = replace(LOCAL, master="spark://10.0.0.5:7077")
ARROW_LOCAL_RELATION = "spark.sql.execution.arrow.localRelationThreshold"


@pytest.fixture(autouse=True)
def no_jars(monkeypatch):
    monkeypatch.setattr(classpath, "resolve", lambda settings: classpath.Classpath((), ()))


def test_rows_staged_through_the_driver_reach_the_executors_as_arrow_batches_not_a_local_relation():
    assert session_conf(CLUSTER)[ARROW_LOCAL_RELATION] == "0"
    assert session_conf(replace(LOCAL, staging="driver"))[ARROW_LOCAL_RELATION] == "0"


def test_rows_staged_as_files_leave_the_arrow_threshold_alone():
    assert ARROW_LOCAL_RELATION not in session_conf(LOCAL)
    assert ARROW_LOCAL_RELATION not in session_conf(replace(CLUSTER, staging="files"))


def test_the_users_conf_wins_over_the_defaults():
    conf = session_conf(replace(CLUSTER, conf={ARROW_LOCAL_RELATION: "16MB", "spark.sql.shuffle.partitions": "8"}))
    assert conf[ARROW_LOCAL_RELATION] == "16MB"
    assert conf["spark.sql.shuffle.partitions"] == "8"
