"""The snapshot: the rows a source held before the stream began, brought into the targets by key-range chunks.

Each chunk is read between two watermarks, signal rows the stream carries
(:mod:`canalbridge.source_db.signals`), and goes into its target at the
second one, without the rows whose keys the stream changed in between
(:mod:`canalbridge.sync.snapshot.chunk_window`): DBLog's algorithm, as Flink CDC
and Debezium run it.
"""
