"""MySQL column types as Canal's ``mysqlType`` declares them (``decimal(10,2) unsigned``), parsed once.

How Canal renders a value of each type lives with the dev kit, which builds
Canal's entries (:mod:`canalbridge.devkit.canal_values`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DECIMAL_GROUP = 9  # MySQL stores a DECIMAL's digits 9 to a group (Canal drops an all-zero last fraction group)
_TYPE_RE = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(unsigned)?\s*(zerofill)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class MySqlType:
    """A column type as MySQL declares it (``mysqlType``), parsed once."""

    declared: str
    base: str
    args: tuple[str, ...]
    unsigned: bool

    @classmethod
    def parse(cls, declared: str) -> MySqlType:
        match = _TYPE_RE.match(declared)
        if not match:
            raise ValueError(f"cannot parse MySQL column type {declared!r}")
        base, args, unsigned, zerofill = match.groups()
        arg_list = tuple(_split_args(args)) if args else ()
        return cls(declared, base.lower(), arg_list, bool(unsigned or zerofill))

    @property
    def fsp(self) -> int:
        """Fractional-seconds precision of time types (0 when not declared)."""
        return int(self.args[0]) if self.args and self.base in ("datetime", "timestamp", "time") else 0

    @property
    def scale(self) -> int:
        return int(self.args[1]) if self.base == "decimal" and len(self.args) > 1 else 0

    @property
    def labels(self) -> tuple[str, ...]:
        """The members of an enum or set, unquoted."""
        return tuple(arg.strip().strip("'").replace("''", "'") for arg in self.args)


def _split_args(args: str) -> list[str]:
    """Split ``'a','b,c'`` or ``10,2`` at commas outside quotes."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in args:
        if char == "'":
            quoted = not quoted
        if char == "," and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts


