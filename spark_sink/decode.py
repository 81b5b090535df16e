"""Canal's RowChange bytes decoded inside Spark, by the JVM decoder in ``spark_sink/decoder``.

The daemon's Python thread can hand Spark the RowChange bytes of an entry as
they came, with the entry's position, and never touch a cell: this module
turns such raw rows into the staged rows the writers already take (an
operation, an order, the position, then the values as Canal's text in
``c0..cN``), the same rows :class:`canalbridge.sync.schema.rows.RowMapper` gives in
Python. The RowChange layout itself is read by ``RowChangeDecoder.java``,
which mirrors ``RowMapper`` rule for rule (old images, key changes, NULLs).

A RowChange whose columns are not the ones the channel expects (an ALTER
upstream, a table map that changed), or bytes that are not a RowChange,
stop the commit inside Spark with ``raise_error``, and
:func:`decode_failure` reads the position and the details back out of
Spark's message, so the job pauses with the same error as on the Python
path.

Run ``python -m spark_sink.decode`` for the Maven properties ``make
decoder-jar`` builds with (the Spark and Scala versions in use).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from canalbridge.mysql_types import canonical
from canalbridge.sync.errors import ColumnsChangedError, EntryDecodeError, SyncError
from canalbridge.sync.model.changes import ChangeKind, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import KEY_MARK, column_signature
from spark_sink.classpath import decoder_jar
from spark_sink.errors import SparkSetupError
from spark_sink.settings import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = structlog.get_logger("canalbridge.spark")
DECODER_CLASS = "canalbridge.spark.RowChangeDecoder"
FUNCTION = "canalbridge_row_changes"
# The decoder's result, one element per row change (RowChangeDecoder.java says what each field holds).
RESULT_TYPE = "array<struct<kind:string,columns:string,values:array<string>>>"
# A raw staged row: the entry's order in the transaction, its position, and its RowChange bytes.
RAW_FIELDS: tuple[tuple[str, str], ...] = (
    ("_entry", "bigint"), ("_journal", "string"), ("_offset", "bigint"), ("_execute_time_ms", "bigint"),
    ("_store_value", "binary"),
)
# _seq of a change: the entry's order, then the change's place in its RowChange (an UPDATE is
# two changes); 2^24 changes per RowChange is far above what one binlog rows event holds.
CHANGE_BITS = 24
# Markers of the failures decoded_changes raises inside Spark, for decode_failure to read back.
_CHANGED = "canalbridge-columns-changed"
_UNDECODABLE = "canalbridge-not-a-row-change"
_UNDECODABLE_KIND = "?"  # RowChangeDecoder.UNDECODABLE
_FAILURE_RE = re.compile(
    rf"(?P<marker>{_CHANGED}|{_UNDECODABLE})\|(?P<journal>[^|]*)\|(?P<offset>-?\d+)\|(?P<count>-?\d+)"
    r"\|(?P<detail>[^\n]*?)\|end")


def register(spark: SparkSession) -> None:
    """Make the decoder callable from Spark SQL in this session (idempotent)."""
    try:
        spark.udf.registerJavaFunction(FUNCTION, DECODER_CLASS, RESULT_TYPE)
    except Exception as exc:
        if DECODER_CLASS not in str(exc):
            raise
        raise SparkSetupError(
            f"the JVM RowChange decoder is not on Spark's classpath (looked for {decoder_jar()}): "
            "run `make decoder-jar`"
        ) from exc


def jvm_decoder(spark: SparkSession, settings: SparkSettings) -> bool:
    """Whether writers hand Spark the RowChange bytes: ``settings.decoder``, and for ``auto``, whether
    the decoder is on Spark's classpath (a ``jvm`` that is not is a :class:`SparkSetupError`)."""
    if settings.decoder == "python":
        return False
    try:
        register(spark)
    except SparkSetupError as exc:
        if settings.decoder == "jvm":
            raise
        log.info("spark.decoder", decoder="python", reason=str(exc))
        return False
    return True


def decoded_changes(raw: DataFrame, columns: Sequence[SourceColumn], key_indexes: Sequence[int] | None, *,
                    source_key: bool = True) -> DataFrame:
    """Raw staged rows (:data:`RAW_FIELDS`) as change rows, one per row change, in binlog order.

    Columns: ``_kind`` (the :class:`ChangeKind` value), ``_seq``, ``_journal``,
    ``_offset``, ``_execute_time_ms``, then ``c0..cN`` as Canal's text.
    ``columns`` are the channel's source columns; ``key_indexes`` ask for
    key-only old images and no old image for an UPDATE that keeps its key
    (``None``: every old image whole). A RowChange with other columns, or
    bytes that are not one, make the query fail with a message
    :func:`decode_failure` reads.
    """
    from pyspark.sql import functions as F

    keys = "" if key_indexes is None else ",".join(str(index) for index in key_indexes)
    exploded = raw.select(
        "_entry", "_journal", "_offset", "_execute_time_ms",
        F.posexplode(F.call_function(FUNCTION, F.col("_store_value"), F.lit(keys))).alias("_pos", "_change"),
    )
    expected = column_signature([(c.name, canonical(c.mysql_type), source_key and c.is_key) for c in columns])
    found, decoded_kind = F.col("_change.columns"), F.col("_change.kind")
    if not source_key:  # a channel with its own key: Canal's key flags are no part of the rows' shape
        found = F.regexp_replace(found, f"{KEY_MARK}(?=, |$)", "")

    def failure(marker: str) -> Column:
        count = F.coalesce(F.size(F.col("_change.values")), F.lit(0)).cast("string")
        return F.raise_error(F.concat_ws(
            "|", F.lit(marker), F.col("_journal"), F.col("_offset").cast("string"), count, found, F.lit("end")))

    kind = (F.when(decoded_kind == F.lit(_UNDECODABLE_KIND), failure(_UNDECODABLE))
            .when(found.isNotNull() & (found != F.lit(expected)), failure(_CHANGED))
            .otherwise(decoded_kind))
    checked = exploded.select(
        kind.alias("_kind"), (F.col("_entry") * F.lit(1 << CHANGE_BITS) + F.col("_pos")).alias("_seq"),
        "_journal", "_offset", "_execute_time_ms", "_change",
    )
    # Every value waits for the checks on _kind: whatever a statement reads (the DELETE only
    # the keys), a RowChange of other columns fails as such, never first as an index past
    # the end of its values or a cast of a shifted column (ANSI mode makes both errors).
    values = [F.when(F.col("_kind").isNotNull(), F.col("_change.values")[index]).alias(f"c{index}")
              for index in range(len(columns))]
    return checked.select("_kind", "_seq", "_journal", "_offset", "_execute_time_ms", *values)


def removes(kind: Column) -> Column:
    """Whether a change row of ``kind`` takes its key out of the table (:attr:`ChangeKind.removes`)."""
    return kind.isin(*[k.value for k in ChangeKind if k.removes])


def decode_failure(exc: BaseException, table: str) -> SyncError | None:
    """The failure :func:`decoded_changes` raised inside Spark, as the sync core's error, if ``exc`` is one.

    :class:`ColumnsChangedError` for a RowChange with other columns (the
    channel words it as its mapper would), :class:`EntryDecodeError` for
    bytes that are not a RowChange.
    """
    match = _FAILURE_RE.search(str(exc))
    if match is None:
        return None
    position = EntryPosition(match["journal"], int(match["offset"]))
    if match["marker"] == _UNDECODABLE:
        return EntryDecodeError(table, match["detail"], position)
    return ColumnsChangedError(table, match["detail"], int(match["count"]), position)


def maven_properties() -> list[str]:
    """``-D`` flags for ``spark_sink/decoder/pom.xml``: the Spark and Scala of the installed pyspark, and the
    Iceberg runtime the session loads."""
    from pathlib import Path

    import pyspark

    from spark_sink.classpath import ICEBERG_VERSION

    jars = Path(pyspark.__file__).parent / "jars"
    scala = next(jars.glob("scala-library-*.jar")).name.removeprefix("scala-library-").removesuffix(".jar")
    return [f"-Dspark.version={pyspark.__version__}", f"-Dscala.version={scala}",
            f"-Diceberg.version={ICEBERG_VERSION}"]


if __name__ == "__main__":
    print(" ".join(maven_properties()))
