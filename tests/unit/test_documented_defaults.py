"""Each default lives in its settings class; README's configuration table must say the same."""

from __future__ import annotations

import re
from pathlib import Path

from canalbridge.config import load_config
from canalbridge.sync.settings import MB
from tests.daemon.test_config import VALID  # sets nothing with a default

README = Path(__file__).resolve().parents[2] / "README.md"
NOT_A_VALUE = ("(required)", "none", "empty", "by name", "source primary key", "state_dir/", "canalbridge-<",
               "true for")
# README names a few keys by their config name where the settings class has another.
ATTRIBUTES = {"job.kafka.format": "record_format"}
KAFKA_JOB = """
[[job]]
name = "k"
[job.kafka]
bootstrap_servers = "127.0.0.1:9092"
topic = "t"
[[job.channel]]
source = "db.k"
target = "lake.db.k"
"""


def documented_defaults() -> dict[str, str]:
    """``section.key`` -> the default cell, for every row of the table that names one value per key."""
    text = README.read_text()
    table = text[text.index("### Configuration reference"):]
    table = table[:table.index("\n### ", 1)]
    found = {}
    for keys, default in re.findall(r"^\| (`[^|]+) \| ([^|]*) \|", table, re.MULTILINE):
        names = re.findall(r"`([^`]+)`", keys)
        section, _, first = names[0].rpartition(".")
        values = [v.strip() for v in re.split(r" / |, ", default)]
        if len(values) != len(names) or any(not v or v.strip("`").startswith(NOT_A_VALUE) for v in values):
            continue
        for name, value in zip([first, *names[1:]], values):
            found[f"{section}.{name}"] = value
    return found


def parse(cell: str) -> object:
    cell = cell.strip("`").split(" (")[0]
    if cell.endswith(" MB"):
        return int(cell[:-3]) * MB
    if re.fullmatch(r"-?\d+", cell):
        return int(cell)
    if cell in ("true", "false"):
        return cell == "true"
    return cell


def test_readme_states_the_defaults_the_code_has(tmp_path):
    path = tmp_path / "canalbridge.toml"
    path.write_text(VALID + KAFKA_JOB)
    config = load_config(path, {})
    job, kafka_job = config.jobs
    owners = {"daemon": config.daemon, "spark": config.spark, "job.canal": job.canal, "job.commit": job.commit,
              "job.maintenance": job.maintenance, "job.schema": job.schema, "job.channel": job.channels[0],
              "job.kafka": kafka_job.kafka}
    documented = documented_defaults()
    assert len(documented) >= 20, sorted(documented)  # the table was found and read
    for key, cell in documented.items():
        section, _, name = key.rpartition(".")
        owner = owners[section]
        name = ATTRIBUTES.get(key, name)
        if not hasattr(owner, name):  # Canal's store settings are kept with the commit settings
            owner = job.commit
            name = name if hasattr(owner, name) else f"store_{name}"
        actual = getattr(owner, name)
        expected = parse(cell)
        same = actual == expected or str(actual) == str(expected)  # client_id is text that looks like a number
        assert same or (isinstance(actual, float) and actual == float(expected)), (key, cell, actual)
