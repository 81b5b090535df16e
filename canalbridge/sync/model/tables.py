"""A source table's identity, which tables a channel rule takes, and where each goes: the one owner of table
names, table patterns and target templates.

A ``[[job.channel]]`` names its source as ``schema.table``, where either part
may be a glob (``shop.*``, ``shop_??.orders_[0-9]*``), or as a regex over
``schema.table`` (``source_regex``); its target may be a template with
``{schema}`` and ``{table}`` (``lake.shop.{table}``, ``lake.{schema}_{table}``).
One pattern becomes one regex, written for both sides that match tables:
Canal's subscription filter and the Consumer's routing, so the two cannot
disagree. Names match case-blind, as Canal's filter does.

A rule *merges* when its template can send several tables to one target
(``shop_*.orders_*`` into ``lake.shop.orders``): the tables are shards of one
table, and share the target's channel.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import NamedTuple

from canalbridge.sync.errors import PatternError

_GLOB = re.compile(r"[*?\[]")
_FIELDS = frozenset({"schema", "table"})


class TableId(NamedTuple):
    r"""A source table: its schema and its name, as an entry's header writes them.

    A tuple, so that the Consumer builds one per entry at a tuple's cost. Two
    ids name one table when their :attr:`key`\ s are equal: MySQL compares
    table names case-blind where Canal's sources run (and Canal's filter does).
    """

    schema: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableId:
        """``schema.table`` (a channel's ``source``, ``signal_table``): the schema ends at the first dot."""
        schema, _, table = text.partition(".")
        return cls(schema, table)

    @property
    def qualified(self) -> str:
        """``schema.table``."""
        return f"{self.schema}.{self.table}"

    @property
    def key(self) -> tuple[str, str]:
        """What compares: both parts case-folded."""
        return self.schema.lower(), self.table.lower()


@dataclass(frozen=True)
class TablePattern:
    """The tables a rule takes: a glob (``regex`` False) or a regex over ``schema.table``."""

    text: str
    regex: bool = False

    def __post_init__(self) -> None:
        if "," in self.text:
            # Canal 1.1.7 splits its filter at every comma (even in {1,3}): a pattern with one would
            # subscribe to something else, and Canal would drop the tables it meant without a word.
            raise PatternError(f"{self.text!r}: a comma splits Canal's filter; write {{1,3}} as an alternation "
                               f"or a class, or use two channels")
        if not self.regex and len(self.text.split(".")) != 2:
            raise PatternError(f"{self.text!r} must name schema.table (either part may have * ? [...])")
        try:
            re.compile(self.filter)
        except re.error as exc:
            raise PatternError(f"{self.text!r} is not a regex: {exc}") from exc

    @property
    def literal(self) -> bool:
        """Whether the pattern is one table's name (no wildcard)."""
        return not self.regex and not _GLOB.search(self.text)

    @property
    def filter(self) -> str:
        """The regex for ``schema.table`` (Canal's filter syntax, which Python's ``re`` reads the same way)."""
        if self.regex:
            return self.text
        schema, table = self.text.split(".")
        return f"{_glob_regex(schema)}\\.{_glob_regex(table)}"

    def matches(self, schema: str, table: str) -> bool:
        return _compiled(self.filter).fullmatch(f"{schema}.{table}") is not None

    @property
    def fixes_schema(self) -> bool:
        """Whether every table the pattern takes is in one schema."""
        return not self.regex and not _GLOB.search(self.text.split(".")[0])


@dataclass(frozen=True)
class TargetTemplate:
    """A target name with ``{schema}`` and ``{table}`` in it, or none."""

    text: str

    def __post_init__(self) -> None:
        try:
            parsed = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(self.text)
                      if name is not None]
        except ValueError as exc:
            raise PatternError(f"{self.text!r}: {exc}") from exc
        if any(spec or conversion for _, spec, conversion in parsed):
            raise PatternError(f"{self.text!r}: a placeholder is {{schema}} or {{table}}, nothing more")
        fields = {name for name, _, _ in parsed}
        unknown = fields - _FIELDS
        if unknown:
            raise PatternError(f"{self.text!r}: unknown placeholder {{{sorted(unknown)[0]}}} (only {{schema}} and "
                               f"{{table}})")
        parts = self.format("s", "t").split(".")
        if len(parts) < 3 or not all(parts):
            raise PatternError(f"{self.text!r} must name catalog.namespace.table")

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(name for _, name, _, _ in string.Formatter().parse(self.text) if name is not None)

    def format(self, schema: str, table: str) -> str:
        return self.text.format(schema=schema, table=table)


def merges(pattern: TablePattern, template: TargetTemplate) -> bool:
    """Whether ``template`` sends several of ``pattern``'s tables into one target (a regex's schemas cannot be
    told: a regex over several with a template of ``{table}`` alone is refused when two tables meet)."""
    if pattern.literal:
        return False
    fields = template.fields
    if "table" not in fields:
        return True
    return "schema" not in fields and not pattern.regex and not pattern.fixes_schema


def _glob_regex(glob: str) -> str:
    """One part of a glob as a regex: ``*`` any run, ``?`` one character, ``[...]`` a class (``[!...]`` negated)."""
    out, index = [], 0
    while index < len(glob):
        char = glob[index]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and (end := glob.find("]", index + 2)) != -1:
            body = glob[index + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            index = end
        else:
            out.append(re.escape(char) if not (char.isalnum() or char == "_") else char)
        index += 1
    return "".join(out)


_cache: dict[str, re.Pattern[str]] = {}


def _compiled(regex: str) -> re.Pattern[str]:
    compiled = _cache.get(regex)
    if compiled is None:
        compiled = _cache[regex] = re.compile(regex, re.IGNORECASE)
    return compiled
