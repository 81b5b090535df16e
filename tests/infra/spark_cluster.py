"""A private Spark standalone cluster for the cluster tests: a master and workers on loopback.

The pip-installed pyspark has no ``sbin/`` scripts, but its
``bin/spark-class`` runs ``Master`` and ``Worker`` (and ``exec``s the JVM, so
the process started here is the JVM). Each gets an explicit heap, its own
ports, and its work and log directories under ``root_dir`` (left to
themselves they write into site-packages). Each worker offers one core and
``worker_memory`` to executors, which the worker starts as child JVMs when
an application connects.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from canalbridge.devkit.progress import die_with_parent
from tests.infra.processes import LOOPBACK, ServiceError, free_port, stop_process, tail, wait_for


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@dataclass
class _Node:
    name: str
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(default_factory=Path)


class SparkStandaloneCluster:
    """``Master`` plus ``workers`` ``Worker`` processes; :attr:`master_url` is what an application connects to."""

    def __init__(self, root_dir: Path, *, workers: int = 2, worker_memory: str = "1g", daemon_heap: str = "256m",
                 start_timeout_s: float = 90.0) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.port = free_port()
        self.webui_port = free_port()
        self.worker_count = workers
        self.worker_memory = worker_memory
        self.daemon_heap = daemon_heap
        self.start_timeout_s = start_timeout_s
        self._master = _Node("master")
        self._workers = [_Node(f"worker-{index}") for index in range(workers)]

    def __repr__(self) -> str:
        return f"SparkStandaloneCluster({self.master_url}, workers={self.worker_count})"

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def start(self) -> SparkStandaloneCluster:
        """Start the master, then the workers, and wait until the master counts them all alive."""
        self._launch(self._master, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                     "--port", str(self.port), "--webui-port", str(self.webui_port))
        master_alive = lambda: self._alive(self._master)  # noqa: E731
        if not wait_for(lambda: self._state() is not None, self.start_timeout_s, alive=master_alive):
            self.stop()
            raise ServiceError(f"the Spark master on {self.master_url} did not start; its log ends with:\n"
                               f"{tail(self._master.log)}")
        for worker in self._workers:
            self._start_worker(worker)
        if not wait_for(lambda: self.alive_workers() == self.worker_count, self.start_timeout_s):
            logs = "\n".join(f"{node.name}:\n{tail(node.log, 15)}" for node in self._workers)
            self.stop()
            raise ServiceError(f"{self.worker_count} workers did not register with {self.master_url}:\n{logs}")
        return self

    def alive_workers(self) -> int:
        state = self._state()
        return sum(1 for worker in (state or {}).get("workers", []) if worker.get("state") == "ALIVE")

    def app_cores(self) -> int:
        """The cores the running applications hold: one per executor here."""
        state = self._state()
        return sum(int(app.get("cores", 0)) for app in (state or {}).get("activeapps", []))

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers run now (children of the worker processes)."""
        pids = []
        for worker in self._workers:
            if worker.process is None:
                continue
            # The JVM starts executors from one of its threads: each thread lists its own children.
            for children in Path(f"/proc/{worker.process.pid}/task").glob("*/children"):
                try:
                    pids += [int(pid) for pid in children.read_text().split()]
                except OSError:
                    continue
        return [pid for pid in pids if _is_executor(pid)]

    def stop(self) -> None:
        """Stop the workers (their executors with them), then the master."""
        for node in [*self._workers, self._master]:
            if node.process is not None:
                stop_process(node.process, 20.0)
                node.process = None

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------

    def _start_worker(self, worker: _Node) -> None:
        work_dir = self.root_dir / worker.name / "work"
        work_dir.mkdir(parents=True, exist_ok=True)
        self._launch(worker, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK, "--port", str(free_port()),
                     "--webui-port", str(free_port()), "--cores", "1", "--memory", self.worker_memory,
                     "--work-dir", str(work_dir), self.master_url)

    def _launch(self, node: _Node, main_class: str, *arguments: str) -> None:
        logs = self.root_dir / node.name / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        node.log = logs / "console.log"
        env = {**os.environ, "SPARK_LOG_DIR": str(logs), "SPARK_LOCAL_IP": LOOPBACK,
               "SPARK_DAEMON_MEMORY": self.daemon_heap, "SPARK_WORKER_DIR": str(self.root_dir / node.name / "work"),
               "SPARK_NO_DAEMONIZE": "1"}
        with node.log.open("ab") as log:
            node.process = subprocess.Popen([str(spark_class()), main_class, *arguments], cwd=self.root_dir / node.name,
                                            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, preexec_fn=die_with_parent)

    @staticmethod
    def _alive(node: _Node) -> bool:
        return node.process is not None and node.process.poll() is None

    def _state(self) -> dict | None:
        """The master's state as its web UI's ``/json`` gives it, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.webui_port}/json", timeout=2) as answer:
                return json.loads(answer.read())
        except (OSError, ValueError):
            return None


def _is_executor(pid: int) -> bool:
    """Whether ``pid`` is a live executor JVM (not one that exited and awaits its worker's reaping)."""
    try:
        return b"CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
