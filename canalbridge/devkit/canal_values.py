"""How Canal renders a value of each MySQL column type: what the dev kit puts in the entries it builds.

Canal ships every value as text plus a ``sqlType`` (java.sql.Types) and the
column's ``mysqlType`` string. The rules here follow Canal's
``LogEventConvert`` and the dbsync ``RowsLogBuffer``/``LogBuffer`` decoders:

- unsigned integers are widened only when the value does not fit the signed
  type, and then ``sqlType`` moves up one size (bigint unsigned -> DECIMAL);
- decimals print their scale, except that a trailing group of fraction
  digits (MySQL stores them 9 to a group) that is all zeros is dropped;
- enum values travel as their 1-based index, sets as their bit mask;
- binary, varbinary and blob bytes travel as ISO-8859-1 text, one char per byte,
  BINARY(n) without its trailing 0x00 pad bytes (CHAR without its trailing spaces);
- float and double print the shortest digits that round-trip, laid out as
  Java's ``toString`` does; Java 8 to 18 (Canal's JVMs) sometimes print more
  digits than that (2e23 as 1.9999999999999998E23), always of the same value;
- datetime/timestamp/time print exactly ``fsp`` fraction digits;
- zero dates print as zeros; NULL has ``isNull`` set and an empty value,
  and its ``sqlType`` differs from a non-NULL value's for set and json.

A column's *logical* value is a plain Python object (int, Decimal, float,
str, bytes, date, datetime, timedelta, ``ZERO_DATE`` or None);
:func:`render` turns it into what Canal would send.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from decimal import Decimal, localcontext

from canalbridge.mysql_types import DECIMAL_GROUP, MySqlType


class SqlType:
    """java.sql.Types constants Canal uses."""

    BIT = -7
    TINYINT = -6
    SMALLINT = 5
    INTEGER = 4
    BIGINT = -5
    REAL = 7
    DOUBLE = 8
    DECIMAL = 3
    CHAR = 1
    VARCHAR = 12
    DATE = 91
    TIME = 92
    TIMESTAMP = 93
    BLOB = 2004
    CLOB = 2005
    OTHER = 1111


class _ZeroDate:
    """MySQL's ``0000-00-00`` (and ``0000-00-00 00:00:00``): not a real date."""

    _instance: _ZeroDate | None = None

    def __new__(cls) -> _ZeroDate:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ZERO_DATE"


ZERO_DATE = _ZeroDate()


@dataclass(frozen=True)
class CanalValue:
    """A value as it travels in a Canal ``Column``."""

    text: str
    sql_type: int
    is_null: bool = False


# (signed sqlType, sqlType after widening, bits) per integer kind.
_INTEGERS = {
    "tinyint": (SqlType.TINYINT, SqlType.SMALLINT, 8),
    "smallint": (SqlType.SMALLINT, SqlType.INTEGER, 16),
    "mediumint": (SqlType.INTEGER, SqlType.INTEGER, 24),
    "int": (SqlType.INTEGER, SqlType.BIGINT, 32),
    "bigint": (SqlType.BIGINT, SqlType.DECIMAL, 64),
}
_TEXTS = {"text", "tinytext", "mediumtext", "longtext"}
_BLOBS = {"blob", "tinyblob", "mediumblob", "longblob", "binary", "varbinary", "geometry"}


def render(mysql_type: MySqlType, value: object) -> CanalValue:
    """Render a logical value the way Canal puts it in ``Column.value``/``sqlType``."""
    if value is None:
        return CanalValue("", null_sql_type(mysql_type), is_null=True)
    base = mysql_type.base
    if base in _INTEGERS:
        signed_type, widened_type, bits = _INTEGERS[base]
        number = int(value)  # type: ignore[call-overload]
        widened = mysql_type.unsigned and number >= 1 << (bits - 1)
        return CanalValue(str(number), widened_type if widened else signed_type)
    if base == "decimal":
        return CanalValue(format_decimal(Decimal(value), mysql_type.scale), SqlType.DECIMAL)  # type: ignore[arg-type]
    if base == "float":
        return CanalValue(java_float_str(float(value)), SqlType.REAL)  # type: ignore[arg-type]
    if base == "double":
        return CanalValue(java_double_str(float(value)), SqlType.DOUBLE)  # type: ignore[arg-type]
    if base == "char":
        # The binlog has CHAR without its trailing pad spaces (as SELECT returns it).
        return CanalValue(str(value).rstrip(" "), SqlType.CHAR)
    if base in ("varchar", "json"):
        return CanalValue(str(value), SqlType.VARCHAR)
    if base in _TEXTS:
        return CanalValue(str(value), SqlType.CLOB)
    if base in _BLOBS:
        data = bytes(value)  # type: ignore[call-overload]
        if base == "binary":
            data = data.rstrip(b"\x00")  # the binlog has BINARY(n) without its trailing 0x00 pad bytes
        return CanalValue(data.decode("latin-1"), SqlType.BLOB)
    if base == "enum":
        label = str(value)
        # MySQL's error value '' (kept by a permissive sql_mode) has index 0 unless '' is a member.
        index = 0 if label == "" and label not in mysql_type.labels else mysql_type.labels.index(label) + 1
        return CanalValue(str(index), SqlType.INTEGER)
    if base == "set":
        members = [m for m in str(value).split(",") if m]
        mask = sum(1 << mysql_type.labels.index(m) for m in members)
        return CanalValue(str(mask), SqlType.BIT)
    if base == "bit":
        return CanalValue(str(int(value)), SqlType.BIT)  # type: ignore[call-overload]
    if base == "year":
        return CanalValue(f"{int(value):04d}", SqlType.VARCHAR)  # type: ignore[call-overload]
    if base == "date":
        text = "0000-00-00" if value is ZERO_DATE else value.isoformat()  # type: ignore[attr-defined]
        return CanalValue(text, SqlType.DATE)
    if base in ("datetime", "timestamp"):
        return CanalValue(format_datetime(value, mysql_type.fsp), SqlType.TIMESTAMP)
    if base == "time":
        return CanalValue(format_time(value, mysql_type.fsp), SqlType.TIME)  # type: ignore[arg-type]
    raise ValueError(f"no Canal rendering for MySQL type {mysql_type.declared!r}")


def null_sql_type(mysql_type: MySqlType) -> int:
    """The ``sqlType`` Canal gives a NULL of this type."""
    if mysql_type.base == "set" or mysql_type.base in _BLOBS:
        return SqlType.BLOB
    if mysql_type.base == "json":
        return SqlType.OTHER
    return render(mysql_type, _example_non_null(mysql_type)).sql_type


def _example_non_null(mysql_type: MySqlType) -> object:
    """A small value of this type, used only to derive the NULL sqlType of simple types."""
    return {
        "decimal": Decimal(0),
        "float": 0.0,
        "double": 0.0,
        "date": dt.date(2000, 1, 1),
        "datetime": dt.datetime(2000, 1, 1),
        "timestamp": dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
        "time": dt.timedelta(0),
        "year": 2000,
        "bit": 0,
        "enum": mysql_type.labels[0] if mysql_type.args else "",
    }.get(mysql_type.base, 0 if mysql_type.base in _INTEGERS else "")


def format_decimal(value: Decimal, scale: int) -> str:
    """Canal's decimal text: the declared scale, minus an all-zero trailing digit group."""
    with localcontext() as context:
        context.prec = 80  # MySQL allows 65 digits; the default context holds 28
        quantized = value.quantize(Decimal(1).scaleb(-scale))
    text = f"{quantized:f}"
    if scale == 0:
        return text
    whole, fraction = text.split(".")
    leftover = scale % DECIMAL_GROUP
    if leftover and set(fraction[-leftover:]) == {"0"}:
        fraction = fraction[:-leftover]
    return f"{whole}.{fraction or '0'}"


def format_datetime(value: object, fsp: int) -> str:
    """``YYYY-MM-DD HH:MM:SS`` plus exactly ``fsp`` fraction digits; timestamps in UTC."""
    if value is ZERO_DATE:
        text = "0000-00-00 00:00:00"
        micros = 0
    else:
        assert isinstance(value, dt.datetime)
        if value.tzinfo is not None:
            # Canal formats timestamps in its JVM's zone; the dev server's Canal runs in UTC.
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        text = f"{value.year:04d}-{value:%m-%d %H:%M:%S}"  # strftime's %Y does not pad years before 1000
        micros = value.microsecond
    return text + (f".{micros:06d}"[: fsp + 1] if fsp else "")


def format_time(value: dt.timedelta, fsp: int) -> str:
    """``[-]HH:MM:SS`` (hours may exceed 99) plus exactly ``fsp`` fraction digits."""
    total_micros = value // dt.timedelta(microseconds=1)
    sign = "-" if total_micros < 0 else ""
    total_micros = abs(total_micros)
    seconds, micros = divmod(total_micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return text + (f".{micros:06d}"[: fsp + 1] if fsp else "")


def _java_style(digits: str, exponent: int, negative: bool) -> str:
    """Lay out shortest ``digits`` x 10^``exponent`` (of the first digit) as Java does."""
    sign = "-" if negative else ""
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole = "0"
            fraction = "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exponent}"


def _shortest_digits(text: str) -> tuple[str, int, bool]:
    """Split a Python ``repr``-style float text into (digits, exponent, negative)."""
    negative = text.startswith("-")
    _, digit_tuple, exponent = Decimal(text.lstrip("-")).normalize().as_tuple()
    assert isinstance(exponent, int), f"{text} is not finite"
    digits = "".join(map(str, digit_tuple))
    return digits, len(digits) + exponent - 1, negative


def java_double_str(value: float) -> str:
    """``Double.toString``: shortest round-trip digits, plain within [1e-3, 1e7)."""
    if value == 0:
        return "-0.0" if struct.pack(">d", value)[0] & 0x80 else "0.0"
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(value)]
    return _java_style(*_shortest_digits(repr(value)))


def java_float_str(value: float) -> str:
    """``Float.toString`` of the nearest 32-bit float: shortest digits that round-trip as float32."""
    single = struct.unpack(">f", struct.pack(">f", value))[0]
    if single == 0 or single != single or single in (float("inf"), float("-inf")):
        return java_double_str(single)
    for precision in range(1, 10):
        text = f"{single:.{precision}g}"
        try:
            round_trip = struct.unpack(">f", struct.pack(">f", float(text)))[0]
        except OverflowError:  # rounding near float32's maximum went past it
            continue
        if round_trip == single:
            return _java_style(*_shortest_digits(repr(float(text))))
    raise AssertionError(f"no round-trip text for float32 {single!r}")
