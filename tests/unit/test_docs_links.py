"""Every pointer into the documentation from code, tests, benchmarks or deploy/ names a page and anchor that exist.

``mkdocs build --strict`` (make docs) checks the links between pages; this
checks the ones MkDocs never sees: comments, docstrings and messages.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
POINTER = re.compile(r"docs/([\w/-]+\.md)(?:#([\w-]+))?")
HEADING = re.compile(r"^#{1,6} (.+?)(?: \{#([\w-]+)\})?\s*$", re.MULTILINE)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)  # no headings in code
    return {explicit or slugify(title, "-") for title, explicit in HEADING.findall(text)}


def pointers() -> list[tuple[str, str, str | None]]:
    found = []
    paths = [ROOT / "Makefile", *(path for folder in ("canalbridge", "spark_sink", "tests", "bench", "deploy")
                                   for path in (ROOT / folder).rglob("*"))]
    for path in paths:
        if (path.suffix in (".py", ".toml", ".java", ".xml", ".sh") or path.name == "Makefile") and path.is_file():
            for match in POINTER.finditer(path.read_text(encoding="utf-8", errors="replace")):
                found.append((str(path.relative_to(ROOT)), match.group(1), match.group(2)))
    return found


def test_pointers_into_the_docs_name_pages_and_anchors_that_exist():
    found = pointers()
    assert len(found) >= 10, found  # the scan saw the code's pointers
    broken = []
    for where, page, anchor in found:
        path = DOCS / page
        if not path.is_file():
            broken.append(f"{where}: docs/{page} does not exist")
        elif anchor and anchor not in anchors(path):
            broken.append(f"{where}: docs/{page} has no anchor #{anchor}")
    assert not broken, "\n".join(broken)
