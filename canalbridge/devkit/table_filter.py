"""Canal's subscription filter: comma-separated ``schema.table`` regexes.

Follows Canal 1.1.7's ``AviaterRegexFilter``: the filter is split at every
comma (``\\d{1,2}`` too: a bracket-aware split came to Canal after 1.1.7),
each pattern must match the whole ``schema.table`` name, matching ignores
case, and an empty filter lets everything through.
"""

from __future__ import annotations

import re


def split_filter(filter_text: str) -> list[str]:
    """Split a Canal filter into its patterns at every comma, as Canal 1.1.7 does (even inside ``{1,2}``)."""
    return [pattern for pattern in filter_text.split(",") if pattern]


class TableFilter:
    """Decides whether a ``schema.table`` passes a Canal subscription filter."""

    def __init__(self, filter_text: str = "") -> None:
        self.text = filter_text
        patterns = split_filter(filter_text)
        # Longest first, as Canal does, so that alternation prefers the longer name.
        patterns.sort(key=len, reverse=True)
        self._regex = (
            re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE | re.DOTALL)
            if patterns
            else None
        )

    def matches(self, schema: str, table: str) -> bool:
        if self._regex is None:
            return True
        name = f"{schema}.{table}"
        if name == ".":
            return True  # Canal lets entries without a table name through
        return self._regex.fullmatch(name.lower()) is not None
