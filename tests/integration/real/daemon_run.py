"""What the real-stack tests that run the daemon share: its config, its ack position, the comparison."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from canalbridge.devkit.entries import TableDef
from canalbridge.devkit.verify import read_typed
from canalbridge.sync.model.position import EntryPosition
from tests.daemon_process import daemon_sections, job_section, job_status
from tests.infra.sql_source import Source, expected_target


def assert_target_equals_source(spark, source: Source, table: TableDef, target: str) -> None:
    """The Iceberg target holds exactly the source table's rows, cell by cell."""
    expected = expected_target(source, table)
    actual = read_typed(spark, target, table)
    assert actual.keys() == expected.keys(), table.name
    for key, row in expected.items():
        assert actual[key] == row, (target, key)


def write_daemon_config(path: Path, canal, destination: str, warehouse: str, channels: str,
                        spark: str | None = None, commit: str = "") -> Path:
    """A config with one job ``real`` reading ``destination`` of the real Canal; the password in the file (0600).
    ``spark``: the ``[spark]`` section's body, instead of ``local[2]`` with a Hadoop catalog at ``warehouse``;
    ``commit``: more ``[job.commit]`` keys."""
    password = canal.canal_settings(destination).password
    path.write_text(daemon_sections(warehouse, spark=spark) + job_section(
        "real", host=canal.host, port=canal.port, destination=destination, username=canal.user,
        credentials=f'password = "{password}"', batch_size=64, min_events=500, commit=commit, channels=channels))
    path.chmod(0o600)
    return path


def spark_section(catalog: str, keys: Mapping[str, str], secret: str, variable: str) -> str:
    """A ``[spark]`` body: ``local[2]``, targets in ``catalog`` configured by ``keys`` (``spark.*``), the key
    ``secret`` read from the environment variable ``variable`` rather than the file (left out of ``keys``)."""
    conf = {key: value for key, value in keys.items() if key != secret}
    return (f'master = "local[2]"\ncatalog = "{catalog}"\n[spark.conf]\n'
            + "".join(f'"{key}" = "{value}"\n' for key, value in conf.items())
            + f'[spark.conf_env]\n"{secret}" = "{variable}"\n')


def acked_through(config, position: EntryPosition) -> bool:
    status = job_status(config, "real")
    if status is None or status["ack_position"] is None:
        return False
    return EntryPosition.from_dict(status["ack_position"]) >= position
