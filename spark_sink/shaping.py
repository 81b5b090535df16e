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
when the writer prepares the table: an expression that no longer fits the
rows (a column it reads dropped or renamed by a DDL) stops the commit there,
naming the entry. Masked and excluded columns follow renames instead
(:meth:`Shaping.alteration`), and the target records what it took
(:data:`PROP_SHAPING`), so that no value the shaping keeps out reaches it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
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
from spark_sink.classpath import decoder_class
from spark_sink.errors import SparkSetupError, TargetTableError, java_error
from spark_sink.identifiers import quote
from spark_sink.table import TargetColumn

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MASK_FUNCTION = "canalbridge_mask"
MASK_CLASS = "canalbridge.spark.Mask"
# What the target took of the shaping, as JSON: the mask and exclude entries, the new names DDLs gave their
# columns (new name -> entry), and the salt's fingerprint.
PROP_SHAPING = "canalbridge.shaping"
_MASKED_DDL_TYPE = "text"  # a masked column stays a string in the target, whatever a DDL makes it in the source
_FINGERPRINT = b"canalbridge mask salt"


class ShapingRefused(ValueError):
    """A DDL the shaping cannot follow (the message names the entry and what to do)."""


class Shaping:
    """The shaping settings of one channel, applied by its writer.

    Masked and excluded columns follow renames: a DDL that renames one adds
    the new name to the set, recorded in the target (:data:`PROP_SHAPING`,
    read back by :meth:`learn`), so its values never reach the target in
    clear or at all under the new name.
    """

    def __init__(self, channel: ChannelSettings, salt: str) -> None:
        self.channel = channel
        self._salt = salt
        self._entries_excluded = frozenset(name.lower() for name in channel.exclude or ())
        self._entries_masked = frozenset(name.lower() for name in channel.mask or ())
        self.excluded = set(self._entries_excluded)  # and the names DDLs renamed them to
        self.masked = set(self._entries_masked)
        self._renamed: dict[str, str] = {}  # a new name a DDL gave a masked or excluded column: its entry
        self.computed = dict(channel.computed)
        self.row_filter = channel.row_filter
        self._registered: object = None  # the JVM session the mask function was registered in

    def __repr__(self) -> str:
        return f"Shaping({self.channel.target})"  # (never the salt)

    @property
    def active(self) -> bool:
        return self.channel.shaped

    # -- without Spark ---------------------------------------------------------------------------

    def learn(self, properties: Mapping[str, str]) -> None:
        """Take the target's record of renames: a column renamed since its ``mask`` or ``exclude`` entry named it
        stays so under its new name, as long as the entry is there."""
        recorded = self._recorded(properties)
        for new, entry in (recorded["renamed"] if recorded else {}).items():
            self._follow(entry, new)

    def _follow(self, entry: str, new: str) -> None:
        if entry in self._entries_masked:
            self.masked.add(new)
            self._renamed[new] = entry
        elif entry in self._entries_excluded:
            self.excluded.add(new)
            self._renamed[new] = entry

    def record(self, properties: Mapping[str, str]) -> dict[str, str]:
        """The table property that records what the target took of the shaping, where ``properties`` (the
        target's) differ: the entries, the renames followed, the salt's fingerprint."""
        if not (self.masked or self.excluded or self._recorded(properties)):
            return {}
        value = json.dumps({"mask": sorted(self._entries_masked), "exclude": sorted(self._entries_excluded),
                            "renamed": self._renamed, "salt": self._fingerprint() if self.masked else None},
                           sort_keys=True)
        return {} if properties.get(PROP_SHAPING) == value else {PROP_SHAPING: value}

    def _fingerprint(self) -> str:
        """Tells one salt from another and nothing of it (an HMAC of a constant)."""
        return hmac.new(self._salt.encode(), _FINGERPRINT, hashlib.sha256).hexdigest()[:16]

    def _recorded(self, properties: Mapping[str, str]) -> dict | None:
        """The target's record (untrusted: checked), None without one."""
        text = properties.get(PROP_SHAPING)
        if text is None:
            return None
        try:
            recorded = json.loads(text)
            names = (isinstance(recorded, dict)
                     and all(isinstance(recorded.get(key), list) and all(isinstance(n, str) for n in recorded[key])
                             for key in ("mask", "exclude"))
                     and isinstance(recorded.get("renamed"), dict)
                     and all(isinstance(k, str) and isinstance(v, str) for k, v in recorded["renamed"].items()))
            if not names:
                raise ValueError("not canalbridge's record")
        except ValueError as exc:
            raise TargetTableError(f"target {self.channel.target}: table property {PROP_SHAPING} is not what "
                                   f"canalbridge writes ({exc}); remove it, or rebuild the target") from None
        return recorded

    def row_columns(self, target_columns: Sequence[str]) -> tuple[str, ...]:
        """The target's columns as the channel's rows map onto them: without the computed ones, with the
        excluded ones (at the end: rows map by name)."""
        computed = {name.lower() for name in self.computed}
        kept = tuple(name for name in target_columns if name.lower() not in computed)
        have = {name.lower() for name in kept}
        return kept + tuple(sorted(name for name in self.excluded if name not in have))

    def alteration(self, changes: Sequence[SchemaChange]) -> tuple[SchemaChange, ...]:
        """A DDL's column changes as the target takes them: none for an excluded column, and a masked column
        stays text whatever type the DDL gives it. A masked or excluded column renamed stays so under its new
        name (:meth:`record` says so to the target). :class:`ShapingRefused`: an unmasked column renamed to a
        masked name (the target would hold its values in clear under it), a column added under a computed
        column's name."""
        taken: list[SchemaChange] = []
        computed = {name.lower() for name in self.computed}
        for change in changes:
            if isinstance(change, AddColumn) and change.column.name.lower() in computed:
                raise ShapingRefused(f"the source gains a column {change.column.name}, the name of "
                                     f"computed.{change.column.name}: rename the computed column, drop the "
                                     f"target's column of that name (ALTER TABLE ... DROP COLUMN) and restart the "
                                     f"daemon")
            if isinstance(change, RenameColumn | ChangeColumn) and change.name.lower() != change.new_name.lower():
                old, new = change.name.lower(), change.new_name.lower()
                if old in self.excluded:
                    self._follow(self._renamed.get(old, old), new)
                    continue
                if new in self.excluded:
                    continue  # (renamed into an excluded name: the target keeps the old, as a dropped column)
                if old in self.masked:
                    self._follow(self._renamed.get(old, old), new)
                elif new in self.masked:
                    raise ShapingRefused(f"column {change.name} is renamed to {change.new_name}, which mask names: "
                                         f"the target holds {change.name}'s values in clear; remove the entry, or "
                                         f"rebuild the target")
            elif isinstance(change, AddColumn | DropColumn | RenameColumn | ChangeColumn):
                name = change.column.name if isinstance(change, AddColumn) else change.name
                if name.lower() in self.excluded:
                    continue
            if isinstance(change, AddColumn):
                change = AddColumn(self._column_def(change.column), self._place(change.place))
            elif isinstance(change, ChangeColumn):
                change = ChangeColumn(change.name, self._column_def(change.column), self._place(change.place))
            taken.append(change)
        return tuple(taken)

    def _column_def(self, column: ColumnDef) -> ColumnDef:
        if column.name.lower() in self.masked:
            return ColumnDef(column.name, _MASKED_DDL_TYPE, column.not_null)
        return column

    def _place(self, place: Place) -> Place:
        """``AFTER`` an excluded column (which the target lacks): where the column goes instead, at the end."""
        return Place() if place.after is not None and place.after.lower() in self.excluded else place

    def check(self, columns: Sequence[str], key: Sequence[str], target: Sequence[str] | None,
              properties: Mapping[str, str]) -> None:
        """The entries against the rows' columns (``columns``, keyed by ``key``) and the target's (``target``,
        with ``properties``; None: the target is to be made); :class:`TargetTableError` naming the entry and
        what to do.

        Each ``exclude`` and ``mask`` entry names a column of the rows, or one
        the target has, or one a DDL renamed (a typo would let the column it
        meant through; a pattern's tables may lack one). The target holds
        nothing the shaping keeps out of it: no excluded column, no masked
        column in clear (written before it was masked), none masked by another
        salt; and no masked values of a column ``mask`` no longer names.
        """
        have = {name.lower() for name in columns} | {name.lower() for name in target or ()}
        if self.channel.pattern is None:
            for setting, entries in (("exclude", self._entries_excluded), ("mask", self._entries_masked)):
                for name in sorted(entries - have - set(self._renamed.values())):
                    raise TargetTableError(f"target {self.channel.target}: {setting} names {name}, which neither "
                                           f"the rows ({', '.join(columns)}) nor the target have: name a column "
                                           f"of theirs (a column a DDL dropped: remove the entry)")
        recorded = self._recorded(properties) or {"mask": [], "exclude": [], "renamed": {}, "salt": None}
        recorded_masked = set(recorded["mask"]) | {new for new, entry in recorded["renamed"].items()
                                                   if entry in recorded["mask"]}
        for name in target or ():
            lowered = name.lower()
            if lowered in self.excluded:
                raise TargetTableError(f"target {self.channel.target}: it has column {name}, which exclude leaves "
                                       f"out: drop the column from the target (ALTER TABLE ... DROP COLUMN), or "
                                       f"rebuild it")
            if lowered in self.masked and lowered not in recorded_masked:
                raise TargetTableError(f"target {self.channel.target}: it holds column {name} in clear, written "
                                       f"before mask named it: rebuild the target, or remove the entry")
            if lowered in recorded_masked and lowered not in self.masked:
                raise TargetTableError(f"target {self.channel.target}: it holds masked values of column {name}, "
                                       f"which mask no longer names: name it again, or rebuild the target")
        if self.masked and recorded.get("salt") not in (None, self._fingerprint()):
            raise TargetTableError(f"target {self.channel.target}: its masked values were keyed by another salt "
                                   f"(masked keys would no longer match): set the salt back, or rebuild the target")
        rows = {name.lower() for name in columns}
        for name in key:
            if name.lower() in self.excluded:
                raise TargetTableError(f"target {self.channel.target}: exclude names {name}, a key column; a "
                                       f"target keeps its key")
        for name in self.computed:
            if name.lower() in rows:
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

    def columns(self, spark: SparkSession, rows: Sequence[TargetColumn], target: Sequence[str] | None,
                properties: Mapping[str, str]) -> list[TargetColumn]:
        """The target's columns for rows of ``rows``' columns (a key column keeps its ``not_null``), the target
        having ``target``'s (None: it is to be made) and ``properties``: Spark's analysis of the shaping, over no
        rows. :class:`TargetTableError` names an entry that does not fit."""
        self.learn(properties)
        self.check([c.name for c in rows], [c.name for c in rows if c.not_null], target, properties)
        if not self.active:
            return list(rows)
        schema = ", ".join(f"{quote(c.name)} {c.spark_type}" for c in rows)
        empty = spark.createDataFrame([], schema)
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
        from pyspark.sql.types import BinaryType

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
                # Bytes as hex: as a string they would be read as UTF-8, and bytes that are not would collide.
                value = F.hex(column) if isinstance(frame.schema[name].dataType, BinaryType) else column.cast("string")
                column = F.call_function(MASK_FUNCTION, value).alias(name)
            elif keep is not None and name == "_op":
                column = F.when(keep, column).otherwise(F.lit("D")).alias(name)
            columns.append(column)
        for name, text in self.computed.items():
            columns.append(self._expression(f"computed.{name}", text).alias(name))
        return self._analysed(frame, lambda: frame.select(*columns))

    def _expression(self, entry: str, text: str) -> Column:
        from pyspark.errors import AnalysisException
        from pyspark.sql import functions as F

        try:
            return F.expr(text)
        except AnalysisException as exc:  # (a ParseException): the entry is not an expression
            raise TargetTableError(f"target {self.channel.target}: {entry} = {text!r} is not a Spark SQL "
                                   f"expression: {_first_line(exc)}") from exc

    def _analysed(self, frame: DataFrame, shaped: Callable[[], DataFrame]) -> DataFrame:
        """``shaped()``; if Spark's analysis refuses it (a column an expression names that the rows lack, a
        function that does not exist, a filter that is no predicate), a :class:`TargetTableError` naming the
        first entry that ``frame`` alone refuses."""
        from pyspark.errors import AnalysisException

        try:
            return shaped()
        except AnalysisException:
            from pyspark.sql import functions as F

            for entry, text in self._entries():
                try:
                    expression = self._expression(entry, text)
                    frame.select(expression.cast("boolean") if entry == "row_filter" else expression)
                except AnalysisException as refused:
                    raise TargetTableError(
                        f"target {self.channel.target}: {entry} = {text!r} does not fit the rows (a column it "
                        f"names renamed or dropped by a DDL?): {_first_line(refused)}; change the entry and "
                        f"restart the daemon") from refused
            if self.row_filter is not None:
                try:
                    frame.where(F.expr(self.row_filter))
                except AnalysisException as refused:
                    raise TargetTableError(f"target {self.channel.target}: row_filter = {self.row_filter!r} is "
                                           f"not a predicate: {_first_line(refused)}") from refused
            raise

    def _register(self, spark: SparkSession) -> None:
        """The mask function in ``spark``, once per session (again after a lost session), keyed by the salt: it
        crosses to the JVM once, not with every commit."""
        if self._registered is spark._jsparkSession:
            return
        mask = decoder_class(spark, MASK_CLASS, f"target {self.channel.target}: mask")
        mask.register(spark._jsparkSession, MASK_FUNCTION, self._salt)
        self._registered = spark._jsparkSession


def _first_line(exc: BaseException) -> str:
    """Spark's message without its plan and stack: the first line, shortened."""
    text = java_error(exc) if hasattr(exc, "java_exception") else str(exc)
    line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return line[:300]
