"""A channel's shaping of its target: columns left out (``exclude``), masked (``mask``), computed
(``computed``), and rows kept by a predicate (``row_filter``).

Applied in Spark to a commit's typed rows, whatever brought them (Canal's
rows decoded in Python or in the JVM, a snapshot's chunks), after the last
change per key is chosen and before the write, so every path shapes alike:

- computed columns and the filter read the row as the channel maps it,
  before any column is masked or left out;
- a masked column becomes the HMAC-SHA256 of its value's text, keyed by the
  daemon's salt (the decoder jar's ``Mask``: the salt stays out of every
  query plan); the same value masks the same in every table, so masked keys
  still join and upsert;
- an upsert target turns a row the filter refuses into a delete of its key
  (an update that moves a row out of the filter removes it), a changelog
  target drops the change.

Which columns a shaped target has is learnt by Spark's analysis of the same
shaping over an empty frame of the rows' columns (:meth:`Shaping.columns`),
when the writer prepares the table: a column an entry names that the rows
lack (dropped or renamed by a DDL) stops the commit there, naming the entry,
before a masked or excluded column could reach the target under a new name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from canalbridge.sync.schema.ddl import (
    AddColumn,
    ChangeColumn,
    ColumnDef,
    DropColumn,
    Place,
    RenameColumn,
    SchemaChange,
)
from canalbridge.sync.settings import ChannelSettings
from spark_sink.classpath import decoder_jar
from spark_sink.errors import SparkSetupError, TargetTableError, java_error
from spark_sink.identifiers import quote
from spark_sink.table import TargetColumn

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MASK_FUNCTION = "canalbridge_mask"
MASK_CLASS = "canalbridge.spark.Mask"
_MASKED_DDL_TYPE = "text"  # a masked column stays a string in the target, whatever a DDL makes it in the source


class Shaping:
    """The shaping settings of one channel, applied by its writer."""

    def __init__(self, channel: ChannelSettings, salt: str) -> None:
        self.channel = channel
        self._salt = salt
        self.excluded = {name.lower() for name in channel.exclude or ()}
        self.masked = {name.lower() for name in channel.mask or ()}
        self.computed = dict(channel.computed)
        self.row_filter = channel.row_filter

    def __repr__(self) -> str:
        return f"Shaping({self.channel.target})"  # (never the salt)

    @property
    def active(self) -> bool:
        return self.channel.shaped

    # -- without Spark ---------------------------------------------------------------------------

    def row_columns(self, target_columns: Sequence[str]) -> tuple[str, ...]:
        """The target's columns as the channel's rows map onto them: without the computed ones, with the
        excluded ones (at the end: rows map by name)."""
        computed = {name.lower() for name in self.computed}
        kept = tuple(name for name in target_columns if name.lower() not in computed)
        have = {name.lower() for name in kept}
        return kept + tuple(name for name in self.channel.exclude or () if name.lower() not in have)

    def alteration(self, changes: Sequence[SchemaChange]) -> tuple[SchemaChange, ...]:
        """A DDL's column changes as the target takes them: none for an excluded column (the target does not
        have it; a rename of one leaves the rows a column of a new name, which the next commit stops at), and
        a masked column stays text whatever type the DDL gives it."""
        taken: list[SchemaChange] = []
        for change in changes:
            if isinstance(change, AddColumn | DropColumn | RenameColumn | ChangeColumn):
                name = change.column.name if isinstance(change, AddColumn) else change.name
                if name.lower() in self.excluded:
                    continue
            if isinstance(change, AddColumn):
                change = AddColumn(self._column_def(change.column), self._place(change.place))
            elif isinstance(change, ChangeColumn):
                if change.name.lower() in self.masked:
                    change = ChangeColumn(change.name, ColumnDef(change.column.name, _MASKED_DDL_TYPE,
                                                                 change.column.not_null), change.place)
                change = ChangeColumn(change.name, change.column, self._place(change.place))
            taken.append(change)
        return tuple(taken)

    def _column_def(self, column: ColumnDef) -> ColumnDef:
        if column.name.lower() in self.masked:
            return ColumnDef(column.name, _MASKED_DDL_TYPE, column.not_null)
        return column

    def _place(self, place: Place) -> Place:
        """``AFTER`` an excluded column (which the target lacks): where the column goes instead, at the end."""
        return Place() if place.after is not None and place.after.lower() in self.excluded else place

    def check(self, columns: Sequence[str], key: Sequence[str], target: Sequence[str]) -> None:
        """The entries against the rows' columns (``columns``, keyed by ``key``) and the target's (``target``);
        :class:`TargetTableError` naming the entry.

        A masked column the rows lack must be one the target kept when a DDL
        dropped it: else a DDL renamed it (or dropped it, and the target with
        it), and its values would reach the target unmasked under the new
        name. An excluded column the rows lack is no matter: one renamed
        brings the rows a column the target does not have, which stops the
        commit anyway.
        """
        have = {name.lower() for name in columns}
        kept = {name.lower() for name in target}
        for name in self.channel.mask or ():
            if name.lower() not in have and name.lower() not in kept:
                raise TargetTableError(
                    f"target {self.channel.target}: mask names {name}, which neither the rows "
                    f"({', '.join(columns)}) nor the target have: renamed by a DDL? name the column as the rows "
                    f"have it (or remove the entry) and restart the daemon")
        for name in key:
            if name.lower() in self.excluded:
                raise TargetTableError(f"target {self.channel.target}: exclude names {name}, a key column; a "
                                       f"target keeps its key")
        for name in self.computed:
            if name.lower() in have:
                raise TargetTableError(f"target {self.channel.target}: computed.{name} has the name of one of "
                                       f"the rows' columns; give it another")

    # -- in Spark --------------------------------------------------------------------------------

    def parse(self, spark: SparkSession) -> None:
        """Check at start what can be checked before rows come: each expression is one Spark can parse, and
        the mask function is there (:class:`TargetTableError`, :class:`SparkSetupError`)."""
        for entry, text in self._entries():
            self._expression(entry, text)
        if self.masked:
            if not self._salt:  # (the config asks for it: a writer made without one is a setup error)
                raise SparkSetupError(f"target {self.channel.target}: mask needs a salt ([spark] mask_salt_env)")
            self._register(spark)

    def _entries(self) -> list[tuple[str, str]]:
        """(entry, expression) of the filter and each computed column."""
        return ([("row_filter", self.row_filter)] if self.row_filter is not None else []) + [
            (f"computed.{name}", text) for name, text in self.computed.items()]

    def columns(self, spark: SparkSession, rows: Sequence[TargetColumn], target: Sequence[str]) -> list[TargetColumn]:
        """The target's columns for rows of ``rows``' columns (a key column keeps its ``not_null``), the target
        having ``target``'s: Spark's analysis of the shaping, over no rows. :class:`TargetTableError` names an
        entry that does not fit."""
        if not self.active:
            return list(rows)
        from pyspark.sql.types import StructField, StructType, _parse_datatype_string

        self.check([c.name for c in rows], [c.name for c in rows if c.not_null], target)
        empty = spark.createDataFrame([], StructType([StructField(c.name, _parse_datatype_string(c.spark_type))
                                                      for c in rows]))
        shaped = self.apply(empty, deletes=False)
        key = {c.name.lower() for c in rows if c.not_null}
        return [TargetColumn(field.name, field.dataType.simpleString(), field.name.lower() in key)
                for field in shaped.schema.fields]

    def apply(self, frame: DataFrame, *, deletes: bool) -> DataFrame:
        """``frame`` (the rows' columns by target name, and the mode's own, such as ``_op``) shaped: computed
        columns added after the others, masked ones hashed, excluded ones gone. ``deletes``: a row the filter
        refuses becomes a delete (``_op`` "D": an upsert target's), else it is dropped."""
        if not self.active:
            return frame
        from pyspark.sql import functions as F

        keep: Column | None = None
        if self.row_filter is not None:
            kept = F.coalesce(self._expression("row_filter", self.row_filter), F.lit(False))
            if deletes:
                keep = kept
            else:
                unfiltered = frame
                frame = self._analysed(unfiltered, lambda: unfiltered.where(kept))
        if self.masked:
            self._register(frame.sparkSession)
        columns: list[Column] = []
        for name in frame.columns:
            lowered = name.lower()
            if lowered in self.excluded:
                continue
            column = F.col(quote(name))
            if lowered in self.masked:
                column = F.call_function(MASK_FUNCTION, column.cast("string")).alias(name)
            elif keep is not None and name == "_op":
                column = F.when(keep, column).otherwise(F.lit("D")).alias(name)
            columns.append(column)
        for name, text in self.computed.items():
            columns.append(self._expression(f"computed.{name}", text).alias(name))
        return self._analysed(frame, lambda: frame.select(*columns))

    def _expression(self, entry: str, text: str) -> Column:
        from pyspark.sql import functions as F

        try:
            return F.expr(text)
        except Exception as exc:  # Spark's parser: the entry is not an expression
            raise TargetTableError(f"target {self.channel.target}: {entry} = {text!r} is not a Spark SQL "
                                   f"expression: {_first_line(exc)}") from exc

    def _analysed(self, frame: DataFrame, shaped: Callable[[], DataFrame]) -> DataFrame:
        """``shaped()``; if Spark's analysis refuses it (a column an expression names that the rows lack, a
        function that does not exist, a filter that is no predicate), a :class:`TargetTableError` naming the
        first entry that ``frame`` alone refuses."""
        try:
            return shaped()
        except TargetTableError:
            raise
        except Exception:
            from pyspark.sql import functions as F

            for entry, text in self._entries():
                try:
                    expression = self._expression(entry, text)
                    frame.select(expression.cast("boolean") if entry == "row_filter" else expression)
                except TargetTableError:
                    raise
                except Exception as refused:
                    raise TargetTableError(
                        f"target {self.channel.target}: {entry} = {text!r} does not fit the rows (a column it "
                        f"names renamed or dropped by a DDL?): {_first_line(refused)}; change the entry and "
                        f"restart the daemon") from refused
            if self.row_filter is not None:
                try:
                    frame.where(F.expr(self.row_filter))
                except Exception as refused:
                    raise TargetTableError(f"target {self.channel.target}: row_filter = {self.row_filter!r} is "
                                           f"not a predicate: {_first_line(refused)}") from refused
            raise

    def _register(self, spark: SparkSession) -> None:
        """The mask function in ``spark`` (again after a lost session), keyed by the salt."""
        from py4j.java_gateway import JavaClass

        mask = spark.sparkContext._jvm
        for part in MASK_CLASS.split("."):
            mask = getattr(mask, part)
        if not isinstance(mask, JavaClass):
            raise SparkSetupError(f"target {self.channel.target}: mask needs the canalbridge decoder jar on "
                                  f"Spark's classpath (looked for {decoder_jar()}): run `make decoder-jar`")
        mask.register(spark._jsparkSession, MASK_FUNCTION, self._salt)


def _first_line(exc: BaseException) -> str:
    """Spark's message without its plan and stack: the first line, shortened."""
    text = java_error(exc) if hasattr(exc, "java_exception") else str(exc)
    line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return line[:300]
