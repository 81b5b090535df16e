"""A DDL's column changes (:mod:`canalbridge.sync.schema.ddl`) planned as Iceberg schema operations.

Pure planning over the target's columns as Spark sees them, so it runs
without Spark; :meth:`spark_sink.table.TargetTable.evolve` carries the plan
out in one Iceberg transaction. The rules:

- ``ADD COLUMN``: a nullable column at the same place (older rows read
  NULL). A column of that name in the target already (one the source
  dropped and the target kept) is refused: reusing it would give rows from
  before the drop their old values, where MySQL gives them NULL.
- ``DROP COLUMN``: dropped when the job drops columns, else kept and made
  nullable (new rows leave it NULL). A key column is never dropped.
- ``RENAME COLUMN`` / ``CHANGE old new``: renamed (Iceberg renames by field
  id: the data stays).
- ``MODIFY`` / ``CHANGE`` to another type: widened where Iceberg allows it
  (int -> bigint, float -> double, a decimal's precision up at the same
  scale); a type that maps to the same Iceberg type (a longer varchar) is no
  change; anything else is refused, naming the column and both types.

A target that several shards share (``shared``) meets each shard's copy of
the same DDL in turn: what the target already shows is no change (an ADD
of a column it has, as wide or wider; a rename done; a type it holds
wider), and only what is left is applied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from canalbridge.sync.schema.ddl import AddColumn, ChangeColumn, DropColumn, Place, RenameColumn, SchemaChange
from spark_sink.errors import EvolutionRefused, UnsupportedTypeError
from spark_sink.types import spark_type


@dataclass(frozen=True)
class Column:
    """A target column as Spark describes it (``spark_type`` as ``DataType.simpleString`` gives it)."""

    name: str
    spark_type: str
    nullable: bool = True


@dataclass(frozen=True)
class Add:
    name: str
    spark_type: str
    place: Place


@dataclass(frozen=True)
class Rename:
    name: str
    new_name: str


@dataclass(frozen=True)
class Widen:
    name: str
    spark_type: str


@dataclass(frozen=True)
class Move:
    name: str
    place: Place


@dataclass(frozen=True)
class Drop:
    name: str


@dataclass(frozen=True)
class MakeNullable:
    name: str


Operation = Add | Rename | Widen | Move | Drop | MakeNullable


def plan(columns: Sequence[Column], changes: Sequence[SchemaChange], *, drop_columns: bool,
         key: Sequence[str] = (), shared: bool = False) -> list[Operation]:
    """The Iceberg operations, in order, that bring ``columns`` where ``changes`` take the source.

    Raises :class:`EvolutionRefused` for a change the target cannot follow.
    """
    try:
        return _plan(columns, changes, drop_columns=drop_columns, key=key, shared=shared)
    except UnsupportedTypeError as exc:
        raise EvolutionRefused(str(exc)) from exc


def widening(column: Column, wanted: str) -> Widen | None:
    """The widening that lets ``column`` take values of Spark type ``wanted``, or None (same type, or not
    a widening: Spark's store assignment then casts as it always did)."""
    if column.spark_type == wanted:
        return None
    try:
        (operation,) = _retype(column, wanted)
    except EvolutionRefused:
        return None
    return operation if isinstance(operation, Widen) else None


def _plan(columns: Sequence[Column], changes: Sequence[SchemaChange], *, drop_columns: bool,
          key: Sequence[str], shared: bool) -> list[Operation]:
    current = {c.name.lower(): c for c in columns}
    keys = {k.lower() for k in key}
    operations: list[Operation] = []

    def find(name: str) -> Column | None:
        return current.get(name.lower())

    for change in changes:
        if isinstance(change, AddColumn):
            wanted = spark_type(change.column.mysql_type)
            existing = find(change.column.name)
            if existing is not None and shared:
                operations.extend(_retype_shared(existing, wanted))  # another shard added it first
                continue
            if existing is not None:
                raise EvolutionRefused(
                    f"the target has a column {existing.name} already (one the source dropped and the target "
                    f"kept?): drop or rename it in the target, then resume")
            operations.append(Add(change.column.name, wanted, change.place))
            current[change.column.name.lower()] = Column(change.column.name, wanted)
        elif isinstance(change, DropColumn):
            existing = find(change.name)
            if existing is None:
                continue
            if existing.name.lower() in keys:
                raise EvolutionRefused(f"column {existing.name} is part of the key: it cannot be dropped or "
                                       f"left NULL")
            if drop_columns:
                operations.append(Drop(existing.name))
                del current[existing.name.lower()]
            elif not existing.nullable:
                operations.append(MakeNullable(existing.name))
                current[existing.name.lower()] = Column(existing.name, existing.spark_type)
        elif isinstance(change, RenameColumn | ChangeColumn):
            new_name = change.new_name
            existing = find(change.name)
            if existing is None:
                if find(new_name) is not None:
                    existing = find(new_name)  # renamed already (by hand): the type and place still apply
                else:
                    raise EvolutionRefused(f"the target has no column {change.name}")
            assert existing is not None
            if existing.name.lower() != new_name.lower():  # (MySQL's names are case-blind)
                if find(new_name) is not None:
                    raise EvolutionRefused(f"cannot rename {existing.name} to {new_name}: the target has "
                                           f"a column {new_name} already")
                operations.append(Rename(existing.name, new_name))
                del current[existing.name.lower()]
                existing = Column(new_name, existing.spark_type, existing.nullable)
                current[new_name.lower()] = existing
            if isinstance(change, ChangeColumn):
                wanted = spark_type(change.column.mysql_type)
                if wanted != existing.spark_type:
                    retyped = _retype_shared(existing, wanted) if shared else _retype(existing, wanted)
                    operations.extend(retyped)
                    if retyped:
                        current[new_name.lower()] = Column(new_name, wanted, existing.nullable)
                if change.place != Place() and not shared:  # (shards may order their columns apart)
                    operations.append(Move(new_name, change.place))
    return operations


def _retype_shared(column: Column, wanted: str) -> list[Operation]:
    """A shared target's column meets a shard's type: widened to it, or kept where it is already as wide."""
    if column.spark_type == wanted:
        return []
    try:
        return _retype(column, wanted)
    except EvolutionRefused:
        try:
            _retype(Column(column.name, wanted), column.spark_type)
        except EvolutionRefused:
            raise EvolutionRefused(f"column {column.name} is {column.spark_type} in the target, which another "
                                   f"shard's DDL made, and this shard's makes it {wanted}: neither widens the "
                                   f"other") from None
        return []  # the target holds the wider type already: this shard's values fit


_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def _retype(column: Column, wanted: str) -> list[Operation]:
    """Widen ``column`` to ``wanted`` where Iceberg can; else refuse, naming both types."""
    have = column.spark_type
    if (have, wanted) in (("int", "bigint"), ("float", "double")):
        return [Widen(column.name, wanted)]
    have_decimal, wanted_decimal = _DECIMAL.match(have), _DECIMAL.match(wanted)
    if have_decimal and wanted_decimal and have_decimal.group(2) == wanted_decimal.group(2) \
            and int(wanted_decimal.group(1)) >= int(have_decimal.group(1)):
        return [Widen(column.name, wanted)]
    raise EvolutionRefused(f"column {column.name} is {have} in the target and would become {wanted}: Iceberg "
                           f"widens only int to bigint, float to double and a decimal's precision")
