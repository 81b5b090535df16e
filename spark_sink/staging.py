"""Rows of an open transaction, staged as text, in memory up to a bound and then in Parquet files.

Every staged row is some typed meta fields (operation, order in the
transaction, position...) followed by the row's values as Canal text; for
the JVM decoder, the meta fields alone, the last one the RowChange's bytes
(:data:`spark_sink.decode.RAW_FIELDS`). Rows are held column by column
(a list per field, not a tuple per row): the garbage collector then walks a
few lists instead of every staged row. Past ``spill_rows`` rows in memory,
they are written to a file under ``spill_dir`` (with pyarrow), so a large
transaction does not hold the Python process's memory hostage; at commit,
what is still in memory is written the same way, and Spark reads the files
as one DataFrame, one of two ways (:attr:`SparkSettings.staging`):

- ``files``: Parquet files that the executors read by path. That costs
  Python less than handing Spark the rows through pandas, and keeps them
  out of the driver's heap; but every executor must see ``spill_dir`` at
  the same path (local Spark, or a shared mount).
- ``driver``: an Arrow IPC stream that the driver's JVM reads whole, as
  PySpark's own ``createDataFrame`` of a pandas frame does, and ships to the
  executors inside their tasks: no path of the daemon's host reaches an
  executor, at the cost of holding a transaction in the driver's heap.

A writer's :class:`Transaction` holds two stagings (decoded rows, or
RowChange bytes) and the snapshot chunks among them.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from canalbridge.sync.model.changes import ChunkBatch, RawBatch, RowBatch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_ARROW_TYPES = {"string": pa.string(), "bigint": pa.int64(), "binary": pa.binary()}
# A staged file lives for one transaction: compressing it costs Python more than it saves.
_PARQUET_OPTIONS: dict[str, Any] = {"compression": "none"}


class Staging:
    """One transaction's staged rows, spilled into a directory of its own. Not thread-safe."""

    def __init__(self, meta_fields: Sequence[tuple[str, str]], spill_rows: int, spill_dir: Path, *,
                 through_driver: bool = False) -> None:
        self.meta_fields = tuple(meta_fields)  # (name, "string" | "bigint" | "binary")
        self.spill_rows = spill_rows
        self.spill_dir = spill_dir
        self.through_driver = through_driver  # Arrow streams the driver reads, rather than Parquet files by path
        self.width: int | None = None  # number of value columns, fixed by the first row
        self._columns: list[list[Any]] = []  # in memory: one list per field
        self._files: list[Path] = []
        # Through the driver, spills append batches to one open stream: one read at commit, not a union of
        # many (200 one-file reads took 17 s to plan).
        self._stream: tuple[Any, Any] | None = None  # (file, stream writer)
        self.count = 0

    def value_names(self) -> list[str]:
        assert self.width is not None
        return [f"c{index}" for index in range(self.width)]

    def add(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Stage rows given as tuples: the meta fields, then the values."""
        if rows:
            self.add_columns(list(zip(*rows)))

    def add_columns(self, columns: Sequence[Sequence[Any]]) -> None:
        """Stage rows given field by field: one sequence of values per meta field, then per value column."""
        if not columns or not columns[0]:
            return
        if self.width is None:
            self.width = len(columns) - len(self.meta_fields)
        assert len(columns) == len(self.meta_fields) + self.width, "rows of another width"
        if not self._columns:
            self._columns = [[] for _ in columns]
        for held, values in zip(self._columns, columns):
            held.extend(values)
        self.count += len(columns[0])
        if self._held >= self.spill_rows:
            self._spill()

    @property
    def _held(self) -> int:
        """Rows in memory."""
        return len(self._columns[0]) if self._columns else 0

    def _schema(self) -> pa.Schema:
        fields = [pa.field(name, _ARROW_TYPES[kind]) for name, kind in self.meta_fields]
        fields += [pa.field(name, pa.string()) for name in self.value_names()]
        return pa.schema(fields)

    def _spill(self) -> None:
        schema = self._schema()
        arrays = [pa.array(values, type=field.type) for values, field in zip(self._columns, schema)]
        table = pa.Table.from_arrays(arrays, schema=schema)
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        if self.through_driver:
            if self._stream is None:
                path = self.spill_dir / f"{uuid.uuid4().hex}.arrows"
                self._files.append(path)  # before writing: clear() removes a file a failed write left half done
                sink = pa.OSFile(str(path), "wb")
                self._stream = (sink, pa.ipc.new_stream(sink, schema))
            self._stream[1].write_table(table)
        else:
            path = self.spill_dir / f"{uuid.uuid4().hex}.parquet"
            self._files.append(path)  # before writing, as above
            pq.write_table(table, path, **_PARQUET_OPTIONS)
        self._columns = []

    def _close_stream(self) -> None:
        if self._stream is not None:
            sink, stream = self._stream
            self._stream = None
            try:
                stream.close()
            finally:
                sink.close()

    def to_dataframe(self, spark: SparkSession) -> DataFrame:
        """All staged rows as one DataFrame (meta fields, then c0..cN as strings)."""
        if self._held:
            self._spill()
        if not self._files:
            return spark.createDataFrame([], schema=self._spark_schema())
        if self.through_driver:
            self._close_stream()  # what is spilled after this goes to a new file
            return _read_in_driver(spark, self._files, self._spark_schema())
        # A staged file that went missing fails the commit, whatever spark.sql.files.ignoreMissingFiles says.
        reader = spark.read.schema(self._spark_schema()).option("ignoreMissingFiles", "false")
        return reader.parquet(*[str(f) for f in self._files])

    def _spark_schema(self) -> str:
        meta = [f"{name} {kind}" for name, kind in self.meta_fields]
        return ", ".join(meta + [f"{name} string" for name in self.value_names()])

    def clear(self) -> None:
        """Drop every staged row; the spill directory (this staging's own) goes with its files."""
        self._columns = []
        self._close_stream()
        if self._files:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
        self._files = []
        self.count = 0


def _read_in_driver(spark: SparkSession, files: Sequence[Path], schema: str) -> DataFrame:
    """Arrow IPC stream files read whole by the driver's JVM: a DataFrame whose rows travel in its tasks.

    PySpark's own ``createDataFrame`` of a pandas frame ends the same way (a
    stream file handed to ``PythonSQLUtils``); here pyarrow wrote the files,
    so no pandas conversion costs Python a copy of the rows.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql.types import _parse_datatype_string

    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a SparkSession without a JVM"
    utils = jvm.org.apache.spark.sql.api.python.PythonSQLUtils
    struct = _parse_datatype_string(schema).json()
    frames = [DataFrame(utils.toDataFrame(utils.readArrowStreamFromFile(str(path)), struct, spark._jsparkSession),
                        spark) for path in files]
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.union(other)
    return frame


Layout = RowBatch | RawBatch | ChunkBatch  # what a transaction's column facts come with


def key_names(batch: Layout) -> list[str]:
    """The target columns of the rows' key, in the order the batch names the key."""
    return [batch.target_columns[i] for i in batch.key_indexes]


@dataclass
class Transaction:
    """One transaction's staged rows and column facts; staged by the channel thread, then applied."""

    staging: Staging  # decoded rows
    raw_staging: Staging  # RowChange bytes, for the JVM decoder: a transaction stages into one of the two
    batch: Layout | None = None  # the column facts of its last batch
    seq: int = 0
    staged_rows: int = 0  # row changes staged (the RowChanges' rowsCount, when undecoded), and chunk rows
    chunks: list[tuple[int, ChunkBatch]] = field(default_factory=list)  # (seq, chunk): its place among the rows

    def clear(self) -> None:
        self.staging.clear()
        self.raw_staging.clear()
        self.chunks = []
