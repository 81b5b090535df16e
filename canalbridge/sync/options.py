"""Every configuration key declared once: its name, type, default, check and one-line description.

A settings dataclass declares each of its keys with :func:`setting`, in
the field itself (Debezium's ``Field`` and Flink's ``ConfigOption`` are the
same idea), so the default a job runs with is the one the loader and the
documentation read. Keys that fill no attribute of their own (a password's
environment variable, a sub-table) are declared as :class:`Option` values
beside the class. :mod:`canalbridge.daemon.config` validates a file by walking
these declarations, and :mod:`canalbridge.daemon.config_reference` writes the
configuration reference page from them.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Why a value is refused, or None when it is fine.
Check = Callable[[Any], str | None]


class _Required:
    """The default of a key the file must set."""

    def __repr__(self) -> str:
        return "REQUIRED"


class _NoValue:
    """The default of an optional key without a value of its own (what it means is in ``default_text``)."""

    def __repr__(self) -> str:
        return "NO_VALUE"


REQUIRED: Any = _Required()
NO_VALUE: Any = _NoValue()
_META = "canalbridge.option"


@dataclass(frozen=True)
class Option:
    """One key of the TOML file: where it is, what it takes, what it defaults to, and what it means."""

    section: str  # the TOML table it sits in: "daemon", "job.commit", ...
    name: str
    kinds: tuple[type, ...]  # the TOML types it takes
    doc: str
    default: Any = NO_VALUE  # REQUIRED, NO_VALUE, or the value
    check: Check | None = None
    default_text: str | None = None  # how the reference states a default the loader works out
    attribute: str | None = None  # the settings attribute it fills; None: the loader reads it
    secret: bool = False  # never echoed

    @property
    def key(self) -> str:
        """Its dotted path, ``job.commit.interval_seconds``."""
        return f"{self.section}.{self.name}"

    @property
    def required(self) -> bool:
        """Whether the file must set it."""
        return self.default is REQUIRED

    def problem(self, value: object) -> str | None:
        """Why ``value`` does not fit this key (its TOML type, then its check), or None."""
        if (isinstance(value, bool) and bool not in self.kinds) or not isinstance(value, self.kinds):
            wanted = " or ".join(kind.__name__ for kind in self.kinds)
            shown = "<hidden>" if self.secret else repr(value)
            return f"must be {wanted}, got {type(value).__name__} {shown}"
        return self.check(value) if self.check is not None else None


@dataclass(frozen=True)
class _Declaration:
    doc: str
    check: Check | None
    name: str | None
    section: str | None
    kinds: tuple[type, ...] | None
    default_text: str | None
    required: bool | None
    secret: bool


def setting(default: Any = REQUIRED, *, doc: str, check: Check | None = None, name: str | None = None,
            section: str | None = None, kinds: tuple[type, ...] | None = None, default_text: str | None = None,
            required: bool | None = None, secret: bool = False) -> Any:
    """A dataclass field that is also a configuration key.

    ``name`` and ``section`` default to the attribute's name and the class's
    ``SECTION``; ``kinds`` to the TOML types the annotation implies.
    ``required=False`` makes a key without a dataclass default optional in
    the file (the loader works its value out: ``default_text`` says how).
    """
    declaration = _Declaration(doc, check, name, section, kinds, default_text, required, secret)
    metadata = {_META: declaration}
    if default is REQUIRED:
        return dataclasses.field(metadata=metadata, repr=not secret)
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata, repr=not secret)
    return dataclasses.field(default=default, metadata=metadata, repr=not secret)


@functools.cache  # the loader asks per section and per channel: the type hints are read once per class
def options_of(cls: type) -> tuple[Option, ...]:
    """The keys a settings class declares, in field order."""
    hints = typing.get_type_hints(cls)
    section = getattr(cls, "SECTION", None)
    found = []
    for item in dataclasses.fields(cls):
        declaration = item.metadata.get(_META)
        if declaration is None:
            continue
        if item.default is not dataclasses.MISSING:
            default = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            default = NO_VALUE if declaration.required is False else REQUIRED
        where = declaration.section or section
        if where is None:
            raise TypeError(f"{cls.__name__}.{item.name}: no section (set SECTION on the class)")
        found.append(Option(
            section=where, name=declaration.name or item.name,
            kinds=declaration.kinds or toml_kinds(hints[item.name]), doc=declaration.doc, default=default,
            check=declaration.check, default_text=declaration.default_text, attribute=item.name,
            secret=declaration.secret,
        ))
    return tuple(found)


def toml_kinds(annotation: Any) -> tuple[type, ...]:
    """The TOML types a field of this annotation takes (an int is fine where a float is wanted)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds: tuple[type, ...] = ()
        for arm in typing.get_args(annotation):
            if arm is not type(None):
                kinds += toml_kinds(arm)
        return kinds
    origin = typing.get_origin(annotation) or annotation
    if origin is float:
        return (int, float)
    if origin is Path:
        return (str,)
    if origin in (tuple, list):
        return (list,)
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return (dict,)
    if origin in (str, int, bool):
        return (origin,)
    raise TypeError(f"no TOML type for {annotation!r}: give kinds=")


def toml_value(value: Any) -> Any:
    """A checked TOML value as its attribute holds it (a list becomes a tuple)."""
    return tuple(value) if isinstance(value, list) else value


# -- checks shared by the declarations --------------------------------------------------------------

def port(value: int) -> str | None:
    """A TCP port."""
    return None if 1 <= value <= 65535 else f"port {value} is outside 1..65535"


def port_or_zero(value: int) -> str | None:
    """A TCP port, or 0 for none."""
    return None if 0 <= value <= 65535 else f"port {value} is outside 0..65535"


def positive(value: float) -> str | None:
    """Above zero."""
    return None if value > 0 else f"must be positive, got {value}"


def not_negative(value: float) -> str | None:
    """Zero or more."""
    return None if value >= 0 else f"must not be negative, got {value}"


def one_of(*choices: str) -> Check:
    """One of ``choices`` (the reference lists them)."""

    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"

    check.choices = choices  # type: ignore[attr-defined]
    return check


def non_empty(value: str) -> str | None:
    """Not blank."""
    return None if value.strip() else "must not be empty"


def local_path(value: str) -> str | None:
    """A path Python can write to (no ``scheme://``)."""
    if not value.strip():
        return "must not be empty"
    # Python writes the staged files: an address only Spark's file systems know would become a local folder.
    return f"must be a local (or mounted) path, got {value!r}" if "://" in value else None


def java_short(value: str) -> str | None:
    """A number as text that fits a Java short (Canal's client id)."""
    if value.lstrip("-").isdigit() and -32768 <= int(value) <= 32767:
        return None
    return f"must be a number that fits a Java short, got {value!r}"


def names(value: list) -> str | None:
    """A non-empty list of column names."""
    if value and all(isinstance(item, str) and item for item in value):
        return None
    return "must be a non-empty list of column names"
