"""Quoting for identifiers and literals that reach Spark SQL text.

Table and column names come from the config and from the binlog, so every
one is quoted; values never reach SQL text (they travel in DataFrames).
"""

from __future__ import annotations


def quote(name: str) -> str:
    """A Spark SQL identifier: backticks, with backticks inside doubled."""
    return "`" + name.replace("`", "``") + "`"


def split_table(target: str) -> list[str]:
    """``catalog.namespace.table`` into its parts; a part may be backtick-quoted to hold dots."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    index = 0
    while index < len(target):
        char = target[index]
        if char == "`":
            if quoted and index + 1 < len(target) and target[index + 1] == "`":
                current.append("`")
                index += 2
                continue
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    if quoted or any(not part for part in parts):
        raise ValueError(f"malformed table name {target!r}")
    return parts


def quote_table(target: str) -> str:
    return ".".join(quote(part) for part in split_table(target))


def sql_string(value: str) -> str:
    """A Spark SQL string literal (backslash escapes are on by default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
