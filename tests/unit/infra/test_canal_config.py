"""Canal's two files as the test stack writes them, and as the getting-started page shows them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.infra import canal_config
from tests.infra.canal_server import canal_passwd

PAGE = Path(__file__).resolve().parents[3] / "docs" / "getting-started.md"

# The keys the getting-started page tells a user to change, with its example values.
SERVER_CHANGES = {
    "canal.ip": "127.0.0.1",
    "canal.user": "canal",
    "canal.passwd": canal_passwd("change-me"),
    "canal.destinations": "example",
    "canal.instance.binlog.format": "ROW",
    "canal.instance.binlog.image": "FULL",
}
INSTANCE_CHANGES = {
    "canal.instance.master.address": "mysql.example.com:3306",
    "canal.instance.dbUsername": "canal",
    "canal.instance.dbPassword": "change-me-too",
    "canal.instance.filter.regex": r"shop\..*",
}


def page_block(name: str) -> str:
    """The page's ``properties`` code block whose first line names ``name``."""
    blocks = re.findall(r"```properties\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    found = [block for block in blocks if block.startswith(f"# {name}:")]
    assert len(found) == 1, (name, [block.splitlines()[0] for block in blocks])
    return found[0]


def test_the_getting_started_page_shows_canal_properties_as_written():
    expected = canal_config.render(canal_config.SERVER_DEFAULTS, SERVER_CHANGES, what="canal.properties")
    assert page_block("canal.properties") == expected


def test_the_getting_started_page_shows_instance_properties_as_written():
    expected = canal_config.render(canal_config.INSTANCE_DEFAULTS, INSTANCE_CHANGES, what="instance.properties")
    assert page_block("instance.properties") == expected


def test_a_changed_key_comes_after_its_default_so_that_it_wins():
    text = canal_config.render(canal_config.SERVER_DEFAULTS, {"canal.port": "12000"}, what="canal.properties")
    lines = [line for line in text.splitlines() if line.startswith("canal.port ")]
    assert lines == ["canal.port = 11111", "canal.port = 12000"]


def test_values_are_escaped_as_java_properties_reads_them():
    text = canal_config.render((), {"canal.instance.filter.regex": r"shop\..*", "k": "caf\u00e9"}, what="x")
    assert r"canal.instance.filter.regex = shop\\..*" in text and r"k = caf\u00e9" in text
