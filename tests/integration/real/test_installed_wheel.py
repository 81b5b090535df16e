"""canalbridge as a user installs it: the wheel ``make dist`` builds, in a fresh virtualenv outside the checkout,
its jars given as the deployment page says (``[spark] jars_dir``), running the demo and a job that snapshots a
MariaDB table while Canal streams it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from canalbridge.devkit.catalog import ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from canalbridge.devkit.progress import die_with_parent
from canalbridge.source_db.signals import SIGNAL_TABLE_DDL
from canalbridge.sync.model.position import EntryPosition
from spark_sink.classpath import ICEBERG_RUNTIME, MARIADB_DRIVER, cache_dir
from tests.daemon_process import job_status
from tests.helpers import eventually
from tests.infra.canal_server import CanalDestination
from tests.infra.sql_source import Source, create_sql
from tests.integration.real.daemon_run import acked_through, assert_target_equals_source, write_daemon_config

pytestmark = [pytest.mark.real, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[3]
DB = "installed"
ORDERS = TableDef(DB, "orders", ORDERS_COLUMNS)
SIGNALS = "canalbridge_signal"
USER, PASSWORD = "installed_reader", "installed-secret"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from this checkout, installed into a new virtualenv; the virtualenv's bin directory."""
    root = tmp_path_factory.mktemp("installed")
    run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(root / "dist"), str(ROOT)],
        cwd=ROOT)
    wheel = next((root / "dist").glob("canalbridge-*.whl"))
    run([sys.executable, "-m", "venv", str(root / "venv")], cwd=root)
    run([str(root / "venv" / "bin" / "pip"), "install", "--quiet", str(wheel)], cwd=root)
    return root / "venv" / "bin"


@pytest.fixture(scope="module")
def jars_dir(tmp_path_factory) -> Path:
    """The jars a snapshot job needs, in one directory, as a host without Maven access gets them."""
    jars = tmp_path_factory.mktemp("jars")
    for jar in (ICEBERG_RUNTIME, MARIADB_DRIVER):  # (the files Maven Central serves for those coordinates)
        found = sorted(cache_dir().glob(jar.cache_glob))
        assert found, f"{jar.coordinates} is not in the cache: run `make {jar.make_target}`"
        (jars / found[-1].name).symlink_to(found[-1])
    return jars


def run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=user_env(),
                            preexec_fn=die_with_parent)
    assert result.returncode == 0, (command, result.stdout[-3000:], result.stderr[-3000:])
    return result


def user_env() -> dict[str, str]:
    """This process's environment without what points into the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("CANALBRIDGE_CACHE", "PYTHONPATH", "VIRTUAL_ENV")}


def test_the_installed_package_is_the_wheels_and_carries_the_decoder(installed, tmp_path):
    where = run([str(installed / "python"), "-c",
                 "import canalbridge.sync.job.job, spark_sink.classpath as c; print(c.__file__, c.decoder_jar())"],
                cwd=tmp_path).stdout.split()
    assert all(path.startswith(str(installed.parent)) for path in where), where
    assert Path(where[1]).is_file()


def test_the_installed_demo_shows_its_progress_and_verifies_every_table(installed, jars_dir, tmp_path):
    result = run([str(installed / "canalbridge"), "demo", "--rows", "3000", "--workdir", str(tmp_path / "demo"),
                  "--jars-dir", str(jars_dir)], cwd=tmp_path)
    assert re.search(r"^\[ *\d+s\] RUNNING  committed [\d,]+ rows .* lag .* acked through ", result.stdout, re.M)
    assert "demo: all tables match" in result.stdout
    assert result.stdout.count(" OK") == 3


@pytest.mark.timeout(600)
def test_an_installed_daemon_snapshots_a_table_and_streams_it(installed, jars_dir, canal, mariadb, spark,
                                                             spark_settings, tmp_path):
    mariadb.create_database(DB)
    mariadb.execute(create_sql(ORDERS), SIGNAL_TABLE_DDL.format(table=SIGNALS), database=DB)
    source = Source(mariadb, DB, (ORDERS,), seed=71)
    source.insert(ORDERS, [source.row(ORDERS) for _ in range(400)])
    source.commit()
    canal.add_destination(CanalDestination(DB, filter_regex=rf"{DB}\..*"))  # the stream starts after those rows
    mariadb.snapshot_user(USER, PASSWORD, DB, SIGNALS)
    spark_section = (f'master = "local[2]"\nwarehouse = "{spark_settings.warehouse}"\n'
                     f"jars_dir = {json.dumps(str(jars_dir))}")
    config = write_daemon_config(tmp_path / "canalbridge.toml", canal, DB, spark_settings.warehouse,
                                 f'[[job.channel]]\nsource = "{ORDERS.qualified}"\ntarget = "lake.wheel.orders"',
                                 spark=spark_section)
    snapshot = (f'[job.snapshot]\nhost = "{mariadb.host}"\nport = {mariadb.port}\nuser = "{USER}"\n'
                f'password = "{PASSWORD}"\nsignal_table = "{DB}.{SIGNALS}"\nchunk_rows = 150\n')
    config.write_text(config.read_text().replace("[[job.channel]]", snapshot + "[[job.channel]]", 1))

    valid = run([str(installed / "canalbridge"), "validate", "-c", str(config)], cwd=tmp_path)
    assert "valid (1 job(s), 1 channel(s))" in valid.stdout and "spark.jars.packages" not in valid.stdout

    log = tmp_path / "daemon.log"
    with open(log, "w") as out:
        daemon = subprocess.Popen([str(installed / "canalbridge"), "run", "-c", str(config)], cwd=tmp_path,
                                  stdout=out, stderr=out, env=user_env(), preexec_fn=die_with_parent)
    try:
        for _ in range(20):  # the stream's rows, while the snapshot reads
            source.insert(ORDERS, [source.row(ORDERS) for _ in range(5)])
            source.update(ORDERS, (3,), source.row(ORDERS, (3,)))
            source.commit()
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert eventually(lambda: daemon.poll() is not None or '"snapshot.finished"' in log.read_text(), 300), (
            log.read_text()[-3000:])
        assert eventually(lambda: daemon.poll() is not None or acked_through(config, last), 300), (
            job_status(config, "real"), log.read_text()[-3000:])
        assert daemon.poll() is None, log.read_text()[-3000:]
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(180) == 0, log.read_text()[-3000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(60)
    assert_target_equals_source(spark, source, ORDERS, "lake.wheel.orders")
    assert spark.table("lake.wheel.orders").count() == 500
