"""A private Prometheus for the monitoring test: Debian's ``prometheus`` (``make prometheus``) on a free loopback
port, scraping given targets every second and evaluating given rule files every second, with its own data
directory. Nothing of the machine's Prometheus service is used."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from canalbridge.devkit.progress import die_with_parent
from tests.infra.processes import (
    LOOPBACK,
    ServiceError,
    ServiceProcess,
    find_binary,
    free_port,
    http_ok,
    port_open,
    tail,
    wait_for,
)

SCRAPE_S = 1  # scrape and evaluation interval: the test's waits are a few of these


class PrometheusServer(ServiceProcess):
    """One Prometheus process scraping ``targets`` (``host:port``, job ``canalbridge``) with ``rule_files``."""

    stop_timeout_s = 20.0

    def __init__(self, data_dir: Path, targets: Sequence[str], rule_files: Sequence[Path] = (), *,
                 start_timeout_s: float = 60.0) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.targets = tuple(targets)
        self.rule_files = tuple(Path(path).resolve() for path in rule_files)
        self.port = free_port()
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "prometheus.log"

    def start(self) -> PrometheusServer:
        """Write its config and wait until it answers ``/-/ready``."""
        if self.running:
            return self
        binary = find_binary("prometheus")
        if binary is None:
            raise ServiceError("prometheus is not installed: `make prometheus` installs Debian's package")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "prometheus.yml"
        config.write_text(json.dumps({  # (JSON is YAML)
            "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [{"job_name": "canalbridge", "static_configs": [{"targets": list(self.targets)}]}],
        }))
        command = [binary, f"--config.file={config}", f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
                   f"--web.listen-address={LOOPBACK}:{self.port}", "--log.level=warn"]
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(command, cwd=self.data_dir, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             preexec_fn=die_with_parent)
        if not wait_for(lambda: port_open(LOOPBACK, self.port) and http_ok(f"{self.url}/-/ready"), self.start_timeout_s,
                        alive=lambda: self.running):
            how = "exited" if not self.running else f"was not ready within {self.start_timeout_s} s"
            self.kill()
            raise ServiceError(f"Prometheus on {self.url} {how}; its log ends with:\n{tail(self.log_file)}")
        return self

    def api(self, path: str, **parameters: str) -> Any:
        """The ``data`` of an HTTP API answer; a failed one raises, with Prometheus' error."""
        query = f"?{urllib.parse.urlencode(parameters)}" if parameters else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=30) as answer:
            document = json.loads(answer.read())
        if document.get("status") != "success":
            raise ServiceError(f"Prometheus answered {path} with {document}")
        return document["data"]

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The series an instant query returns now."""
        return list(self.api("query", query=expression)["result"])

    def query_range(self, expression: str, start: float, end: float) -> list[dict[str, Any]]:
        """The series a range query returns over ``start``..``end`` (Unix seconds), a point a second."""
        return list(self.api("query_range", query=expression, start=f"{start:.3f}", end=f"{end:.3f}",
                             step=f"{SCRAPE_S}s")["result"])

    def rules(self) -> list[dict[str, Any]]:
        """Every rule loaded, with its ``health``, ``lastError`` and ``state``."""
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]

    def rules_evaluated_after(self, moment: float) -> bool:
        """Whether every rule was evaluated after ``moment`` (Unix seconds): its ``state`` reflects the samples
        scraped since."""
        evaluated = [rule.get("lastEvaluation") for rule in self.rules()]
        return bool(evaluated) and all(each is not None and _unix(each) > moment for each in evaluated)

    def targets_up(self) -> bool:
        """Whether every target's last scrape worked."""
        active = self.api("targets")["activeTargets"]
        return bool(active) and all(target["health"] == "up" for target in active)


def _unix(rfc3339: str) -> float:
    """Prometheus's time (``2026-12-07T14:10:02.123456789Z``, nanoseconds, any offset) as Unix seconds."""
    match = re.fullmatch(r"(.+?)(\.\d+)?(Z|[+-]\d\d:\d\d)", rfc3339)
    assert match is not None, rfc3339
    whole, fraction, offset = match.groups()
    moment = datetime.datetime.fromisoformat(whole + ("+00:00" if offset == "Z" else offset))
    return moment.timestamp() + float(fraction or 0)
