"""Canal's subscription filter: comma-separated ``schema.table`` regexes.

Follows Canal's ``AviaterRegexFilter``: the filter is split on commas that
are not inside ``{}``, ``[]`` or ``()`` (so ``\\d{1,2}`` survives), each
pattern must match the whole ``schema.table`` name, matching ignores case,
and an empty filter lets everything through.
"""

from __future__ import annotations

import re


def split_filter(filter_text: str) -> list[str]:
    """Split a Canal filter into its patterns at top-level commas."""
    patterns: list[str] = []
    depth = {"{": 0, "[": 0, "(": 0}
    closing = {"}": "{", "]": "[", ")": "("}
    start = 0
    index = 0
    while index < len(filter_text):
        char = filter_text[index]
        if char == "\\":
            index += 2  # an escaped character never opens or closes a group
            continue
        if char in depth:
            depth[char] += 1
        elif char in closing and depth[closing[char]] > 0:
            depth[closing[char]] -= 1
        elif char == "," and not any(depth.values()):
            if index > start:
                patterns.append(filter_text[start:index])
            start = index + 1
        index += 1
    if start < len(filter_text):
        patterns.append(filter_text[start:])
    return patterns


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
