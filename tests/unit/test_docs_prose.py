"""The manual's own rules, beside markdownlint and the spelling check (``make prose``): a user page says what to
do and what happens. Lab notes (a measurement's story, what the code used to do, the tracker's numbers) belong
in bench/HISTORY.md, the commits and the design pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_PAGES = sorted([ROOT / "README.md", ROOT / "docs" / "index.md", ROOT / "docs" / "getting-started.md",
                     ROOT / "docs" / "performance.md", *(ROOT / "docs" / "guide").glob("*.md"),
                     *(ROOT / "docs" / "reference").glob("*.md")])
# Each: what it catches, as a case-insensitive pattern.
LAB_NOTES = {
    "a tracker's or a session's number": r"\b(issue|stop|session) #?\d+\b",
    "what the code used to do": r"\bused to (be|do|take|read|write|pause|ack|commit|skip|delete|show|say|cost)\b",
    "a measurement's story": r"\*\*what changed\b|\bmeasured (before|when)\b|\bon a (slower|faster|busier) day\b"
                             r"|\ban earlier build\b|\bminutes apart\b",
    "a progress report": r"\bstatus: every part\b|\|\s*done\s*(\(|\|)",
}


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_a_user_page_holds_no_lab_notes(page):
    text = page.read_text(encoding="utf-8")
    found = [f"{what}: {match.group(0)!r}" for what, pattern in LAB_NOTES.items()
             for match in re.finditer(pattern, text, re.IGNORECASE)]
    assert not found, found
