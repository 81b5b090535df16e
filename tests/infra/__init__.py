"""Test infrastructure: what the tests, the benchmarks and ``make demo-real`` start and check with.

Process managers for the real stack (a private MariaDB, the real Canal
server, a Kafka broker: each on loopback, on free ports, with its own data
directory), the artifacts cache the Makefile fills, SQL workloads, Kafka
feeds, an in-memory channel writer with failure injection and a reference
consumer. Not part of the product and not in the wheel: nothing under
``canalbridge/`` or ``spark_sink/`` imports it (tests/unit/test_layers.py).
"""
