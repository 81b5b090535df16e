"""A target's sort order as a channel's ``sort_by`` names it: fields of a column or a transform of one, each
ascending or descending, nulls first or last."""

from __future__ import annotations

import re
from dataclasses import dataclass

from canalbridge.sync.model.partitions import PartitionField, PartitionSpecError

_ORDER = re.compile(r"^(.*?)(?:\s+(asc|desc))?(?:\s+nulls\s+(first|last))?$", re.IGNORECASE)


@dataclass(frozen=True)
class SortField:
    """One field of a target's sort order: ``term`` (a column, or an Iceberg transform of one), its direction,
    and where its nulls go (Iceberg's default: first when ascending, last when descending)."""

    term: PartitionField
    descending: bool = False
    nulls_first: bool = True

    @classmethod
    def parse(cls, text: str) -> SortField:
        """``term [ASC|DESC] [NULLS FIRST|NULLS LAST]``, ``term`` as ``partition_by`` writes one;
        :class:`PartitionSpecError` otherwise."""
        matched = _ORDER.match(str(text).strip())
        assert matched is not None  # (every text matches: the term takes what the words do not)
        term, direction, nulls = matched.groups()
        descending = (direction or "asc").lower() == "desc"
        try:
            field = PartitionField.parse(term)
        except PartitionSpecError as exc:
            raise PartitionSpecError(f"{text!r}: write a column or a transform of one, then ASC or DESC, then "
                                     f"NULLS FIRST or NULLS LAST ({exc})") from None
        return cls(field, descending, not descending if nulls is None else nulls.lower() == "first")

    @property
    def order(self) -> str:
        """The direction and the nulls' place, as SQL writes them (``DESC NULLS LAST``)."""
        return f"{'DESC' if self.descending else 'ASC'} NULLS {'FIRST' if self.nulls_first else 'LAST'}"

    def __str__(self) -> str:
        return f"{self.term} {self.order}"


def sort_fields(value: list) -> str | None:
    """A setting's check: a non-empty list of sort fields, each term at most once."""
    if not value or not all(isinstance(item, str) for item in value):
        return "must be a non-empty list of sort fields, e.g. [\"created_at DESC\", \"id\"]"
    try:
        fields = [SortField.parse(item) for item in value]
    except PartitionSpecError as exc:
        return str(exc)
    terms = [(field.term.transform, field.term.column.lower(), field.term.size) for field in fields]
    if len(set(terms)) != len(terms):
        return "names the same term twice"
    return None
