"""Prometheus's evaluation times, read as Unix seconds: what the monitoring test waits on."""

from __future__ import annotations

import datetime

import pytest

from tests.infra.prometheus import _unix

MOMENT = datetime.datetime(2026, 12, 7, 14, 10, 2, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(("text", "seconds"), [
    ("2026-12-07T14:10:02Z", MOMENT),
    ("2026-12-07T14:10:02.123456789Z", MOMENT + 0.123456789),
    ("2026-12-07T15:10:02.5+01:00", MOMENT + 0.5),
])
def test_nanoseconds_and_offsets_read_as_the_same_instant(text, seconds):
    assert _unix(text) == pytest.approx(seconds, abs=1e-6)
