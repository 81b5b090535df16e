"""The alert rules and the dashboard that deploy/ ships: promtool checks the rules and runs their tests (each
alert fires when it should, a quiet source fires none), and every metric they name is one the daemon exports
and the metrics page lists. (A real Prometheus scraping a real daemon: tests/integration/real/test_monitoring.py.)"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.infra.processes import find_binary

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "deploy" / "prometheus" / "canalbridge-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "canalbridge-rules.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "canalbridge-dashboard.json"
METRICS_PAGE = REPO / "docs" / "reference" / "metrics.md"
SUFFIXES = ("_total", "_bucket", "_sum", "_count")  # what the exposition adds to a counter's or histogram's name


def promtool(*args: str) -> subprocess.CompletedProcess:
    binary = find_binary("promtool")
    assert binary, "promtool is missing: `make prometheus` installs Debian's prometheus"
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, cwd=RULES.parent)


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def documented() -> set[str]:
    return set(re.findall(r"^\| `(canalbridge_[a-z_]+)` \|", METRICS_PAGE.read_text(), re.M))


def named(expression: str) -> set[str]:
    """The canalbridge metrics an expression reads, by the names the metrics page gives."""
    names = set()
    for name in re.findall(r"canalbridge_[a-z_]+", expression):
        for suffix in SUFFIXES:
            if name.endswith(suffix) and name.removesuffix(suffix) in documented():
                name = name.removesuffix(suffix) + ("_total" if suffix == "_total" else "")
        names.add(name)
    return names


def test_the_rules_are_valid_and_their_tests_pass():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0 and "SUCCESS: 5 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_metric_the_rules_and_the_dashboard_read_is_one_the_metrics_page_lists():
    rules = RULES.read_text()
    expressions = [*re.findall(r"expr: >\n((?:\s+.+\n)+)|expr: (.+)", rules), *dashboard_expressions()]
    read = set()
    for expression in expressions:
        read |= named("".join(expression) if isinstance(expression, tuple) else expression)
    assert read and read <= documented(), sorted(read - documented())


def test_every_metric_a_dashboard_panel_reads_is_filtered_by_the_jobs_chosen():
    for expression in dashboard_expressions():
        for found in re.finditer(r"canalbridge_[a-z_]+", expression):
            assert expression[found.end():].startswith('{sync_job=~"$sync_job"}'), expression
