"""Rows of an open transaction, staged as text, in memory up to a bound and then in Parquet files.

Every staged row is a tuple of some typed meta fields (operation, order in
the transaction, position...) followed by the row's values as Canal text;
for the JVM decoder, the meta fields alone, the last one the RowChange's
bytes (:data:`spark_sink.decode.RAW_FIELDS`).
Past ``spill_rows`` rows in memory, they are written to a Parquet file
under ``spill_dir`` (with pyarrow), so a large transaction does not hold
the Python process's memory hostage. At commit, the whole staging becomes
one Spark DataFrame. Spilled files are read by Spark from the local file
system: on a cluster, put ``spill_dir`` on storage the executors can read.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_ARROW_TYPES = {"string": pa.string(), "bigint": pa.int64(), "binary": pa.binary()}


class Staging:
    """One channel's staged rows. Not thread-safe: the channel thread owns it."""

    def __init__(self, meta_fields: Sequence[tuple[str, str]], spill_rows: int, spill_dir: Path) -> None:
        self.meta_fields = tuple(meta_fields)  # (name, "string" | "bigint" | "binary")
        self.spill_rows = spill_rows
        self.spill_dir = spill_dir
        self.width: int | None = None  # number of value columns, fixed by the first row
        self._rows: list[tuple] = []
        self._files: list[Path] = []
        self.count = 0
        # Files left by a daemon that died mid-transaction: the state directory
        # is locked to one daemon, so nobody else can still be using them.
        shutil.rmtree(self.spill_dir, ignore_errors=True)

    def value_names(self) -> list[str]:
        assert self.width is not None
        return [f"c{index}" for index in range(self.width)]

    def add(self, rows: Sequence[tuple]) -> None:
        if not rows:
            return
        if self.width is None:
            self.width = len(rows[0]) - len(self.meta_fields)
        self._rows.extend(rows)
        self.count += len(rows)
        if len(self._rows) >= self.spill_rows:
            self._spill()

    def _schema(self) -> pa.Schema:
        fields = [pa.field(name, _ARROW_TYPES[kind]) for name, kind in self.meta_fields]
        fields += [pa.field(name, pa.string()) for name in self.value_names()]
        return pa.schema(fields)

    def _arrow(self) -> pa.Table:
        columns = list(zip(*self._rows)) if self._rows else [()] * (len(self.meta_fields) + (self.width or 0))
        return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, self._schema())],
                                    schema=self._schema())

    def _spill(self) -> None:
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        path = self.spill_dir / f"{uuid.uuid4().hex}.parquet"
        pq.write_table(self._arrow(), path)
        self._files.append(path)
        self._rows = []

    def to_dataframe(self, spark: SparkSession) -> DataFrame:
        """All staged rows as one DataFrame (meta fields, then c0..cN as strings)."""
        frames = []
        if self._rows:
            frames.append(spark.createDataFrame(self._arrow().to_pandas(), schema=self._spark_schema()))
        if self._files:
            frames.append(spark.read.schema(self._spark_schema()).parquet(*[str(f) for f in self._files]))
        if not frames:
            return spark.createDataFrame([], schema=self._spark_schema())
        result = frames[0]
        for frame in frames[1:]:
            result = result.unionByName(frame)
        return result

    def _spark_schema(self) -> str:
        meta = [f"{name} {kind}" for name, kind in self.meta_fields]
        return ", ".join(meta + [f"{name} string" for name in self.value_names()])

    def clear(self) -> None:
        self._rows = []
        for path in self._files:
            path.unlink(missing_ok=True)
        self._files = []
        self.count = 0
