"""Property: whatever the workload and wherever failures strike, the targets end exact
and no ack ever covers a row its table has not committed."""

from __future__ import annotations

import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canalbridge.devkit import DestinationConfig, DevServer
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.workload import Workload, WorkloadSpec

from .harness import Harness, job_settings

TABLES = [t.qualified for t in standard_tables(3)]

failure_points = st.fixed_dictionaries(
    {
        table: st.fixed_dictionaries(
            {
                "fail_commit_at": st.sets(st.integers(1, 8), max_size=3),
                "fail_send_at": st.sets(st.integers(1, 12), max_size=2),
            }
        )
        for table in TABLES
    }
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(50, 600),
    tables=st.integers(1, 3),
    pk_change_ratio=st.floats(0, 0.6),
    delete_weight=st.floats(0, 0.4),
    rows_per_transaction=st.integers(1, 40),
    batch_size=st.integers(3, 300),
    failures=failure_points,
    drop_after_acks=st.one_of(st.none(), st.integers(1, 400)),
    seed=st.integers(0, 10_000),
)
def test_random_workloads_and_failures_converge_exactly(
    rows, tables, pk_change_ratio, delete_weight, rows_per_transaction, batch_size, failures, drop_after_acks, seed
):
    server = DevServer([DestinationConfig("example", capacity=1024)]).start()
    try:
        spec = WorkloadSpec(
            tables=standard_tables(tables), row_changes=rows, pk_change_ratio=pk_change_ratio,
            delete_weight=delete_weight, rows_per_transaction=(1, rows_per_transaction), seed=seed,
        )
        workload = Workload(spec)
        harness = Harness(server, workload, job_settings(server, workload, batch_size=batch_size), **failures)
        if drop_after_acks is not None:
            acked: list = []
            dropped = threading.Event()

            def drop(events):
                acked.extend(events)
                if len(acked) >= drop_after_acks and not dropped.is_set():
                    dropped.set()
                    threading.Thread(target=server.drop_connections).start()

            server.destinations["example"].store.add_ack_listener(drop)
        harness.feed()
        harness.run_until_acked(timeout_s=60)
        harness.job.pause()
        harness.assert_exact()
    finally:
        server.stop()
