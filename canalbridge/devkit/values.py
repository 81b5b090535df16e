"""Random logical values for each MySQL type, extremes included."""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
from decimal import Context, Decimal

from canalbridge.devkit.canal_values import ZERO_DATE
from canalbridge.mysql_types import MySqlType

_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
# Letters from 1-, 2-, 3- and 4-byte UTF-8, quotes and backslashes included.
_ALPHABET = "abcxyzABC019 _-'\"\\/éßøЖя中文字😀🚀𝄞"
_WIDE = Context(prec=80)  # MySQL decimals have up to 65 digits
_EPOCH_MIN = dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
_EPOCH_MAX = dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=dt.UTC)


def _text(rng: random.Random, max_chars: int) -> str:
    length = rng.randint(0, max_chars)
    return "".join(rng.choice(_ALPHABET) for _ in range(length))


def _truncate_micros(micros: int, fsp: int) -> int:
    step = 10 ** (6 - fsp)
    return micros // step * step


def random_value(mysql_type: MySqlType, rng: random.Random) -> object:
    """A random non-NULL logical value of ``mysql_type``; about 1 in 10 is an extreme."""
    base = mysql_type.base
    extreme = rng.random() < 0.1
    if base in _INT_BITS:
        bits = _INT_BITS[base]
        low, high = (0, (1 << bits) - 1) if mysql_type.unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        return rng.choice((low, high)) if extreme else rng.randint(low, high)
    if base == "decimal":
        precision, scale = int(mysql_type.args[0]), mysql_type.scale
        digits = precision if extreme else rng.randint(1, precision)
        unscaled = int("9" * digits) if extreme else rng.randint(0, 10**digits - 1)
        if rng.random() < 0.15:
            unscaled = unscaled // 10**scale * 10**scale if scale else unscaled  # trailing zeros
        # scaleb in a wide context: the default one holds 28 digits and would round.
        return Decimal(unscaled * rng.choice((1, -1))).scaleb(-scale, context=_WIDE)
    if base == "float":
        raw = rng.choice((3.4e38, -1.5e-38)) if extreme else round(rng.uniform(-1e6, 1e6), 2)
        return struct.unpack(">f", struct.pack(">f", raw))[0]
    if base == "double":
        if extreme:
            return rng.choice((1.7976931348623157e308, -2.2250738585072014e-308, 1e-5))
        return rng.uniform(-1e9, 1e9)
    if base in ("char", "varchar"):
        limit = int(mysql_type.args[0]) if mysql_type.args else 16
        text = "" if extreme else _text(rng, limit)
        return text.rstrip(" ") if base == "char" else text  # MySQL strips CHAR padding
    if base in ("text", "tinytext", "mediumtext", "longtext"):
        return _text(rng, 200)
    if base == "enum":
        return rng.choice(mysql_type.labels)
    if base == "set":
        return ",".join(label for label in mysql_type.labels if rng.random() < 0.5)
    if base == "json":
        document = {"id": rng.randint(0, 1000), "tags": [_text(rng, 4) for _ in range(2)], "ok": rng.random() < 0.5}
        # MySQL stores object keys sorted by length, then bytes; Canal prints them in that order.
        ordered = dict(sorted(document.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode())))
        return json.dumps(ordered, ensure_ascii=False, separators=(", ", ": "))
    if base == "binary":
        width = int(mysql_type.args[0])
        data = bytes(rng.choice((0, 255, rng.randint(1, 254))) for _ in range(width - 1))
        return data + bytes([rng.randint(1, 255)])  # MySQL strips trailing 0x00 pad bytes
    if base in ("varbinary", "blob", "tinyblob", "mediumblob", "longblob"):
        data = bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 16)))
        return bytes([0, 255]) + data if extreme else data
    if base == "bit":
        width = int(mysql_type.args[0]) if mysql_type.args else 1
        return (1 << width) - 1 if extreme else rng.randint(0, (1 << width) - 1)
    if base == "year":
        return rng.choice((0, 1901, 2155)) if extreme else rng.randint(1901, 2155)
    if base == "date":
        if extreme:
            return rng.choice((ZERO_DATE, dt.date(1000, 1, 1), dt.date(9999, 12, 31)))
        return dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(-300_000, 300_000))
    if base == "datetime":
        if extreme:
            latest = dt.datetime(9999, 12, 31, 23, 59, 59, _truncate_micros(999_999, mysql_type.fsp))
            return rng.choice((ZERO_DATE, dt.datetime(1000, 1, 1), latest))
        moment = dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randint(-10**9, 10**9))
        return moment.replace(microsecond=_truncate_micros(rng.randint(0, 999_999), mysql_type.fsp))
    if base == "timestamp":
        if extreme:
            return rng.choice((_EPOCH_MIN, _EPOCH_MAX))
        span = int((_EPOCH_MAX - _EPOCH_MIN).total_seconds())
        moment = _EPOCH_MIN + dt.timedelta(seconds=rng.randint(0, span))
        return moment.replace(microsecond=_truncate_micros(rng.randint(0, 999_999), mysql_type.fsp))
    if base == "time":
        limit = 838 * 3600 + 59 * 60 + 59
        if extreme:
            return dt.timedelta(seconds=rng.choice((limit, -limit)))
        micros = _truncate_micros(rng.randint(0, 999_999), mysql_type.fsp)
        return dt.timedelta(seconds=rng.randint(-limit + 1, limit - 1), microseconds=micros)
    raise ValueError(f"no value generator for MySQL type {mysql_type.declared!r}")
