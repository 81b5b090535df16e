"""How far a table's snapshot has come: stored with the target's data, so a restart resumes at the next chunk.

A chunk's rows and the progress they make are committed in one target
commit, beside the channel's position. So after a crash the target says
exactly which chunks it holds: the snapshot goes on after the last key
done, up to the last key taken when the table's snapshot began, and no
chunk is applied twice.

Keys are stored as JSON with each value's type, since the next chunk's
bounds are SQL literals of the same types (:mod:`canalbridge.source_db.chunks`).

What a target's summary holds is not trusted: anyone who can commit to the
table can write it. So a stored progress is checked before anything of it
reaches the source: a back-fill's filter must be one condition
(:func:`~canalbridge.source_db.filters.checked_filter`, as the command line
checks it), a decimal key finite and of MySQL's size, the snapshot's id
the shape this module gives it.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from canalbridge.source_db.chunks import KeyValues
from canalbridge.source_db.filters import FilterError, checked_filter
from canalbridge.sync.errors import ProgressFormatError

_SNAPSHOT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # (uuid4().hex[:12] in the runner; it names signal rows)
_DECIMAL_DIGITS = 65  # MySQL's DECIMAL holds at most 65 digits


@dataclass(frozen=True)
class TableProgress:
    """The snapshot ``snapshot`` of ``table`` (``schema.table``): chunks are done through key ``done`` (None:
    none yet), out of those through ``last`` (None: the table was empty). ``done`` is always a planned range's
    upper bound, the last one ``last`` itself, so a table is finished when they are equal. ``where``: the rows
    it takes, when it is a back-fill of some (``canalbridge snapshot --where``). ``rows``: rows of the chunks
    landed so far, over every run of this snapshot. ``planned`` False: a rebuild's first mark landed, and the keys are
    planned after it (``last`` None then says nothing of the table)."""

    snapshot: str
    table: str
    last: KeyValues | None
    done: KeyValues | None = None
    key: tuple[str, ...] = ()  # the key's columns the values are of (a key changed since: the values say nothing)
    where: str | None = None
    rows: int = 0
    planned: bool = True

    @property
    def finished(self) -> bool:
        return self.planned and (self.last is None or self.done == self.last)

    def advanced(self, done: KeyValues, rows: int = 0) -> TableProgress:
        """This progress once the chunk through ``done``, of ``rows`` rows, landed."""
        return TableProgress(self.snapshot, self.table, self.last, done, self.key, self.where, self.rows + rows,
                             self.planned)

    def to_json(self) -> str:
        stored = {"snapshot": self.snapshot, "table": self.table, "last": _encode(self.last),
                  "done": _encode(self.done), "key": list(self.key), "rows": self.rows}
        if self.where is not None:
            stored["where"] = self.where
        if not self.planned:
            stored["planned"] = False  # (written only then: stamps of earlier versions read as planned)
        return json.dumps(stored, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TableProgress:
        try:
            stored = json.loads(text)
            where = stored.get("where")
            snapshot = str(stored["snapshot"])
            if not _SNAPSHOT_ID.fullmatch(snapshot):
                raise ValueError(f"a snapshot id {snapshot[:40]!r} this version never makes")
            return cls(snapshot, str(stored["table"]), _decode(stored["last"]), _decode(stored["done"]),
                       tuple(str(column) for column in stored.get("key", ())),
                       None if where is None else checked_filter(str(where)),
                       int(stored.get("rows", 0)),  # (none stored by versions before it)
                       stored.get("planned", True) is not False)
        except FilterError as exc:
            raise ProgressFormatError(f"snapshot progress with a filter that is not one condition, refused: {exc}"
                                      ) from None
        except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
            raise ProgressFormatError(f"snapshot progress this version cannot read: {text[:200]!r} ({exc})") from None


def _encode(key: KeyValues | None) -> list[list[str]] | None:
    return None if key is None else [_encode_value(value) for value in key]


def _encode_value(value: object) -> list[str]:
    if isinstance(value, bool):
        raise ValueError(f"no key value {value!r}")
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, bytes | bytearray):
        return ["bytes", bytes(value).hex()]
    if isinstance(value, decimal.Decimal):
        return ["decimal", format(value, "f")]
    if isinstance(value, datetime.datetime):
        return ["datetime", value.isoformat()]
    if isinstance(value, datetime.date):
        return ["date", value.isoformat()]
    if isinstance(value, datetime.timedelta):
        return ["time", str(value // datetime.timedelta(microseconds=1))]
    raise ValueError(f"no key value of type {type(value).__name__}: {value!r}")


def _decode(stored: list[list[str]] | None) -> KeyValues | None:
    if stored is None:
        return None
    return tuple(_decode_value(kind, text) for kind, text in stored)


def _decode_value(kind: str, text: str) -> object:
    if not isinstance(text, str):
        raise TypeError(f"a key value stored as {text!r}, not as text")
    if kind == "int":
        return int(text)
    if kind == "str":
        return text
    if kind == "bytes":
        return bytes.fromhex(text)
    if kind == "decimal":
        value = decimal.Decimal(text)
        digits = value.as_tuple()
        if not value.is_finite() or len(digits.digits) > _DECIMAL_DIGITS or abs(int(digits.exponent)) > _DECIMAL_DIGITS:
            raise ValueError(f"a decimal key value MySQL cannot hold: {text[:40]!r}")
        return value
    if kind == "datetime":
        return datetime.datetime.fromisoformat(text)
    if kind == "date":
        return datetime.date.fromisoformat(text)
    if kind == "time":
        return datetime.timedelta(microseconds=int(text))
    raise ValueError(f"a key value of unknown kind {kind!r}")


def progress_to_json(progress: Mapping[str, TableProgress]) -> str:
    """Every table's progress a target holds (a merged target holds several tables'), as one JSON text."""
    return json.dumps({table: json.loads(each.to_json()) for table, each in sorted(progress.items())},
                      sort_keys=True)


def progress_from_json(text: str | None) -> dict[str, TableProgress]:
    """What :func:`progress_to_json` wrote (None, as a target without any: none)."""
    if text is None:
        return {}
    try:
        stored = json.loads(text)
        return {str(table): TableProgress.from_json(json.dumps(each)) for table, each in stored.items()}
    except (ValueError, AttributeError) as exc:
        raise ProgressFormatError(f"snapshot progress this version cannot read: {text!r} ({exc})") from None


@dataclass(frozen=True)
class SnapshotStatus:
    """A table's snapshot as the running job sees it (status, metrics): ``phase`` is ``waiting`` (for the tables
    before it), ``reading``, ``finished``, ``cancelled``, ``gone`` (dropped) or ``parked`` (it cannot go on:
    ``error`` says why and what to do); chunks and rows landed in this run, through key
    ``done`` of ``last`` (as text), at ``rows_per_second`` since the table's first chunk of this run;
    ``rows_done`` by the snapshot over all its runs, of about ``rows_estimate`` (the server's estimate, None for a
    back-fill of some rows), which leaves about ``seconds_left`` at this run's rate."""

    phase: str
    chunks: int = 0
    rows: int = 0
    done: str | None = None
    last: str | None = None
    rows_per_second: float | None = None
    rows_done: int = 0
    rows_estimate: int | None = None
    seconds_left: float | None = None
    error: str | None = None


def combined(statuses: Sequence[SnapshotStatus]) -> SnapshotStatus:
    """The snapshot of a target that several tables merge into (shards), as one status: their chunks and rows
    added up, the rate of those being read; ``reading`` while any table is left, once one began. Key bounds are
    the tables' own, so it has none; the rows and time left only when every table left has an estimate."""
    phases = {status.phase for status in statuses}
    if len(phases) == 1:
        phase = phases.pop()
    elif phases & {"reading", "waiting"}:
        phase = "reading"
    elif "parked" in phases:
        phase = "parked"
    else:
        phase = "cancelled" if "cancelled" in phases else "finished"
    left = [status for status in statuses if status.phase in ("reading", "waiting")]
    # (The shards are read one after the other: the rate is the one being read's, not a done one's.)
    rates = [status.rows_per_second for status in left if status.rows_per_second is not None]
    estimates = [status.rows_estimate for status in statuses]
    seconds = [status.seconds_left for status in left]
    return SnapshotStatus(
        phase, sum(s.chunks for s in statuses), sum(s.rows for s in statuses), None, None,
        round(sum(rates), 1) if rates else None, sum(s.rows_done for s in statuses),
        None if None in estimates else sum(e for e in estimates if e is not None),
        None if not left or None in seconds else round(sum(s for s in seconds if s is not None), 1),
        next((status.error for status in statuses if status.error is not None), None))
