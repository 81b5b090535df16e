"""MySQL column types as Canal's ``mysqlType`` declares them (``decimal(10,2) unsigned``), parsed once.

How Canal renders a value of each type lives with the dev kit, which builds
Canal's entries (:mod:`canalbridge.devkit.canal_values`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

DECIMAL_GROUP = 9  # MySQL stores a DECIMAL's digits 9 to a group (Canal drops an all-zero last fraction group)
_TYPE_RE = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(unsigned)?\s*(zerofill)?\s*$", re.IGNORECASE)
# Other names MySQL accepts in a DDL for a type, by the name SHOW CREATE TABLE gives it.
ALIASES = {"integer": "int", "bool": "tinyint", "boolean": "tinyint", "numeric": "decimal", "dec": "decimal",
           "fixed": "decimal", "real": "double", "double precision": "double"}
INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})


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
        base = base.lower()
        if base in ("bool", "boolean") and not arg_list:
            arg_list = ("1",)
        return cls(declared, ALIASES.get(base, base), arg_list, bool(unsigned or zerofill))

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


# canonical's grammar: ASCII only, so that the JVM's java.util.regex reads it alike (RowChangeDecoder).
_CANONICAL_RE = re.compile(r"\s*([a-z]+(?: +precision)?)\s*(?:\((.*)\))?\s*(unsigned)?\s*(zerofill)?\s*",
                           re.IGNORECASE | re.ASCII | re.DOTALL)
_BLANKS = " \t\n\r\f\v"  # what \s is in ASCII mode, in Python and in Java
_WIDTH_ONE = frozenset({"char", "binary", "bit"})  # (1) when the DDL gives none
_FRACTIONAL = frozenset({"datetime", "timestamp", "time"})  # (0) is the same as none


@lru_cache(maxsize=4096)
def canonical(declared: str) -> str:
    """A column type spelled one way whichever way its DDL spelled it: the type's name in lower case and
    resolved from its aliases, no display width on an integer type or a year, the width SHOW CREATE TABLE
    gives where the DDL gave none (a decimal's precision and scale, a char's, a binary's, a bit's 1), no
    fractional-seconds precision of 0, a float's precision turned into float or double, no blanks outside
    quotes, ``unsigned`` for ``zerofill`` too. Quoted enum and set labels keep their case.

    Canal with its schema history on describes a column as the DDL that made it spelled it (``INT``),
    and as the live table shows it otherwise (``int(11)``): rows and snapshot chunks compare their
    columns in this form. The JVM decoder spells them the same (``RowChangeDecoder.canonical``), which a
    test checks: ASCII only, so that both languages read every character alike. A type this cannot
    parse is only lower-cased outside quotes.
    """
    match = _CANONICAL_RE.fullmatch(declared)
    if not match:
        return _lower_unquoted(declared.strip("".join(map(chr, range(33)))))  # (what Java's trim() strips)
    base, args, unsigned, zerofill = match.groups()
    base = re.sub(" +", " ", _lower_unquoted(base))
    base = ALIASES.get(base, base)
    args = _lower_unquoted("".join(_unquoted_blanks_dropped(args or "")))
    if base in INTEGERS or base == "year":
        args = ""
    elif base == "decimal":
        args = args or "10"
        args = args if "," in args else args + ",0"
    elif base in _WIDTH_ONE:
        args = args or "1"
    elif base in _FRACTIONAL and args == "0":
        args = ""
    elif base == "float" and re.fullmatch("[0-9]+", args):
        base, args = ("float" if int(args) <= 24 else "double"), ""
    text = f"{base}({args})" if args else base
    return text + " unsigned" if unsigned or zerofill else text


def _lower_unquoted(text: str) -> str:
    """``text`` with the ASCII letters outside single quotes lower-cased."""
    out: list[str] = []
    quoted = False
    for char in text:
        if char == "'":
            quoted = not quoted
        out.append(chr(ord(char) + 32) if not quoted and "A" <= char <= "Z" else char)
    return "".join(out)


def _unquoted_blanks_dropped(text: str) -> list[str]:
    out: list[str] = []
    quoted = False
    for char in text:
        if char == "'":
            quoted = not quoted
        if quoted or char not in _BLANKS:
            out.append(char)
    return out


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


