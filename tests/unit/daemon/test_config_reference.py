"""Each key is declared once; the loader and the configuration reference page both read that declaration."""

from __future__ import annotations

from canalbridge.daemon.config import OPTIONS, load_config
from canalbridge.daemon.config_reference import PAGE, TABLES, render
from canalbridge.sync.options import NO_VALUE, REQUIRED
from tests.configs import VALID  # sets nothing with a default

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


SNAPSHOT_JOB = """
[[job]]
name = "s"
[job.canal]
host = "127.0.0.1"
port = 11111
destination = "other"
[job.snapshot]
host = "127.0.0.1"
user = "snapshotter"
signal_table = "db.canalbridge_signal"
[[job.channel]]
source = "db.s"
target = "lake.db.s"
"""


def test_the_reference_page_is_the_one_the_declarations_give():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/reference/configuration.md is stale: run `make config-reference` and commit the page")


def test_the_page_has_a_section_for_every_table_and_a_row_for_every_key():
    page = render()
    assert set(TABLES) == set(OPTIONS)
    for table, options in OPTIONS.items():
        section = page[page.index(f"{{#{table.replace('.', '-')}}}"):]
        section = section[:section.find("\n## ")] if "\n## " in section else section
        for name in options:
            assert f"| `{name}` |" in section, (table, name)


def test_a_file_that_sets_nothing_runs_with_the_declared_defaults(tmp_path):
    path = tmp_path / "canalbridge.toml"
    path.write_text(VALID + KAFKA_JOB + SNAPSHOT_JOB)
    config = load_config(path, {})
    job, kafka_job, snapshot_job = config.jobs
    owners = {"daemon": config.daemon, "spark": config.spark, "job": job, "job.canal": job.source,
              "job.commit": job.commit, "job.maintenance": job.maintenance, "job.schema": job.schema,
              "job.cuts": job.cuts,
              "job.channel": job.channels[0], "job.kafka": kafka_job.source, "job.snapshot": snapshot_job.snapshot}
    checked = 0
    for table, options in OPTIONS.items():
        for option in options.values():
            worked_out = option.default in (REQUIRED, NO_VALUE) or option.default_text  # the page says how
            if option.attribute is None or worked_out or option.secret:  # (VALID sets the password)
                continue
            owner = job.commit if option.attribute.startswith("store_") else owners[table]
            assert getattr(owner, option.attribute) == option.default, option.key
            checked += 1
    assert checked >= 50, checked  # the walk saw the declarations
