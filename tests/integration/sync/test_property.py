"""Property: whatever the workload and wherever failures strike, the targets end exact
and no ack ever covers a row its table has not committed."""

from __future__ import annotations

import math
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canalbridge.devkit import DestinationConfig, DevServer
from canalbridge.devkit.catalog import standard_tables
from canalbridge.devkit.workload import Workload, WorkloadSpec

from .harness import Harness, job_settings

TABLES = [t.qualified for t in standard_tables(3)]

# What strikes once a number of entries are acked: a network cut, a Canal
# restart (from the meta cursor's entry on, acked entries come again), a Canal
# crash (everything acked since its last meta flush comes again).
INTERRUPTIONS = {
    "drop": DevServer.drop_connections,
    "restart": DevServer.restart,
    "crash": lambda server: server.restart(crash=True),
}

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
    interruption=st.sampled_from([None, *sorted(INTERRUPTIONS)]),
    strike_after=st.integers(1, 200),
    seed=st.integers(0, 10_000),
)
def test_random_workloads_and_failures_converge_exactly(
    rows, tables, pk_change_ratio, delete_weight, rows_per_transaction, batch_size, failures, interruption,
    strike_after, seed,
):
    # No meta flush: a crash delivers again everything acked, whatever the timing.
    server = DevServer([DestinationConfig("example", capacity=1024, meta_flush_period_s=math.inf)]).start()
    strikers: list[threading.Thread] = []
    try:
        spec = WorkloadSpec(
            tables=standard_tables(tables), row_changes=rows, pk_change_ratio=pk_change_ratio,
            delete_weight=delete_weight, rows_per_transaction=(1, rows_per_transaction), seed=seed,
        )
        workload = Workload(spec)
        harness = Harness(server, workload, job_settings(server, workload, batch_size=batch_size), **failures)
        if interruption is not None:
            acked: list = []
            struck = threading.Event()

            def strike(events):  # runs under the store's lock: act from another thread
                acked.extend(events)
                if len(acked) >= strike_after and not struck.is_set():
                    struck.set()
                    strikers.append(threading.Thread(target=INTERRUPTIONS[interruption], args=(server,)))
                    strikers[-1].start()

            server.destinations["example"].store.add_ack_listener(strike)
        harness.feed()
        harness.run_until_acked(timeout_s=60)
        harness.job.pause()
        for striker in strikers:
            striker.join(timeout=60)
            assert not striker.is_alive(), "the server did not come back"
        harness.assert_exact()
    finally:
        for striker in strikers:  # a restart must be over before the server stops for good
            striker.join(timeout=60)
        server.stop()
