"""A target's partition field as a channel's ``partition_by`` names it: a column, or an Iceberg transform of one."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The transforms, as the config spells them; those that take a width or a bucket count first.
TRANSFORMS = ("identity", "bucket", "truncate", "year", "month", "day", "hour")
_SIZED = ("bucket", "truncate")
_TIMES = ("year", "month", "day", "hour")
_MAX_SIZE = 2**31 - 1  # (Iceberg's, an int)
_CALL = re.compile(r"^(\w+)\((.*)\)$")
_COLUMN = re.compile(r"^[^\s(),`]+$")


class PartitionSpecError(ValueError):
    """A ``partition_by`` entry that names no transform of a column; the message says what is expected."""


@dataclass(frozen=True)
class PartitionField:
    """One field of a target's partition spec: ``transform`` of ``column`` (``size``: a bucket's count or a
    truncation's width)."""

    transform: str
    column: str
    size: int | None = None

    @classmethod
    def parse(cls, text: str) -> PartitionField:
        """``col``, ``identity(col)``, ``bucket(n, col)``, ``truncate(w, col)``, ``year(col)``, ``month(col)``,
        ``day(col)`` or ``hour(col)``; :class:`PartitionSpecError` otherwise."""
        compact = re.sub(r"\s*([(),])\s*", r"\1", str(text).strip())  # (spaces around the punctuation only)
        if _COLUMN.match(compact):
            return cls("identity", compact)
        call = _CALL.match(compact)
        if call is None:
            raise PartitionSpecError(f"{text!r} is neither a column nor a transform of one: write a column, or one "
                                     f"of {', '.join(_spelled(each) for each in TRANSFORMS)}")
        transform, arguments = call.group(1).lower(), call.group(2).split(",")
        if transform not in TRANSFORMS:
            raise PartitionSpecError(f"{text!r}: {call.group(1)} is not a transform (known: {', '.join(TRANSFORMS)})")
        if transform in _SIZED:
            if len(arguments) != 2 or not arguments[0].isdigit() or not 1 <= int(arguments[0]) <= _MAX_SIZE \
                    or not _COLUMN.match(arguments[1]):
                size = "n" if transform == "bucket" else "w"
                raise PartitionSpecError(f"{text!r}: write {_spelled(transform)}, {size} a whole number from 1 to "
                                         f"{_MAX_SIZE}")
            return cls(transform, arguments[1], int(arguments[0]))
        if len(arguments) != 1 or not _COLUMN.match(arguments[0]):
            raise PartitionSpecError(f"{text!r}: write {_spelled(transform)}")
        return cls(transform, arguments[0])

    def __str__(self) -> str:
        if self.transform == "identity":
            return self.column
        return f"{self.transform}({'' if self.size is None else f'{self.size}, '}{self.column})"


def _spelled(transform: str) -> str:
    return {"identity": "identity(col)", "bucket": "bucket(n, col)", "truncate": "truncate(w, col)"}.get(
        transform, f"{transform}(col)")


def partition_fields(value: list) -> str | None:
    """A setting's check: a non-empty list of partition fields, each column at most once per transform."""
    if not value or not all(isinstance(item, str) for item in value):
        return "must be a non-empty list of partition fields, e.g. [\"bucket(16, id)\", \"day(created_at)\"]"
    try:
        fields = [PartitionField.parse(item) for item in value]
    except PartitionSpecError as exc:
        return str(exc)
    seen = [(field.transform, field.column.lower()) for field in fields]
    if len(set(seen)) != len(seen):
        return "names the same transform of a column twice"
    # (Iceberg refuses two of them on one column: each is a coarser view of the same time.)
    times = [field.column.lower() for field in fields if field.transform in _TIMES]
    if len(set(times)) != len(times):
        return "names two of year, month, day and hour of one column: Iceberg takes one"
    return None
