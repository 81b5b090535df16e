"""Times as every page and status line shows them: ISO 8601, in UTC, to the second."""

from __future__ import annotations

import time


def utc_text(ms: float) -> str:
    """``ms`` (since the epoch) as ``2026-12-07T00:40:49Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
