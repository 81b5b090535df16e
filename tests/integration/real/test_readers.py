"""Every kind of target, read by the readers users read them with: Spark, pyiceberg and DuckDB.

Three tables of MariaDB change under real Canal into an upsert target with equality deletes (the default), an
upsert target with position deletes (``upsert_deletes = "position"``) and a changelog target. Each reader
reads each target and is compared with MariaDB; what each reader does with each kind of target is the matrix
of the reading page (docs/guide/reading.md), which this test reads and checks cell by cell. The page's
queries are the ones run here.
"""

from __future__ import annotations

import re
from decimal import Decimal
from importlib.metadata import distribution
from pathlib import Path

import pytest

from canalbridge.devkit.catalog import ORDERS_COLUMNS
from canalbridge.devkit.entries import TableDef
from canalbridge.sync.job.job import SyncJob
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings, CommitSettings, JobSettings
from spark_sink.sink import make_sink
from tests.infra.sql_source import Source

pytestmark = [pytest.mark.real, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "guide" / "reading.md"
DB = "readers"
COLUMNS = ("id", "customer", "amount", "status", "note")  # compared: each reader gives these the same Python types
TARGETS = {  # the page's row -> (table, channel)
    "upsert, equality deletes": ChannelSettings(f"{DB}.eq", f"lake.{DB}.eq"),
    "upsert, position deletes": ChannelSettings(f"{DB}.pos", f"lake.{DB}.pos", upsert_deletes="position"),
    "changelog": ChannelSettings(f"{DB}.log", f"lake.{DB}.log", mode="changelog"),
}
READERS = ("Spark", "pyiceberg", "DuckDB")
COMMIT = CommitSettings(interval_seconds=0.3, min_events=1, min_bytes=1, retries=0)
# The current state of a changelog target: each key's last change, unless it removed the key. As on the page.
CURRENT_STATE = """SELECT * FROM (
  SELECT *, row_number() OVER (
    PARTITION BY id ORDER BY length(_journal) DESC, _journal DESC, _offset DESC, _seq DESC) AS _last
  FROM changes)
WHERE _last = 1 AND _op IN ('+I', '+U', '+S')"""


def page_matrix() -> dict[str, dict[str, str]]:
    """The reading page's matrix: target kind -> reader -> its cell's first words."""
    lines = PAGE.read_text().split("<!-- readers matrix -->")[1].strip().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    matrix = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        matrix[cells[0]] = {reader: cells[header.index(reader)] for reader in READERS}
    return matrix


def metadata_file(warehouse: str, target: str) -> str:
    """The newest metadata file of a Hadoop catalog's table: what pyiceberg and DuckDB are given."""
    table = Path(warehouse).joinpath(*target.split(".")[1:])
    version = (table / "metadata" / "version-hint.text").read_text().strip()
    return str(table / "metadata" / f"v{version}.metadata.json")


def rows_of(records) -> dict[int, tuple]:  # type: ignore[no-untyped-def]
    """Rows keyed by id, each as the compared columns' values (decimals exact, at two places)."""
    found = {}
    for record in records:
        values = tuple(Decimal(v).quantize(Decimal("0.01")) if n == "amount" and v is not None else v
                       for n, v in zip(COLUMNS, (record[c] for c in COLUMNS)))
        assert values[0] not in found, f"key {values[0]} twice"
        found[values[0]] = values
    return found


def duckdb_connection():  # type: ignore[no-untyped-def]
    """DuckDB with the avro and iceberg extensions the PyPI packages ``duckdb-ext-*`` carry (no download)."""
    import duckdb

    connection = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for name in ("avro", "iceberg"):
        path = next(file.locate() for file in distribution(f"duckdb-ext-{name}").files or ()
                    if file.name.endswith(".duckdb_extension"))
        connection.execute(f"LOAD '{path}'")
    return connection


def read(reader: str, spark, warehouse: str, target: str, changelog: bool) -> dict[int, tuple]:  # type: ignore[no-untyped-def]
    """What ``reader`` reads of ``target`` (a changelog's current state, by :data:`CURRENT_STATE`), or the error
    it raises."""
    query = f"SELECT {', '.join(COLUMNS)} FROM ({CURRENT_STATE})" if changelog else None
    if reader == "Spark":
        spark.table(target).createOrReplaceTempView("changes")
        return rows_of(row.asDict() for row in spark.sql(query or f"SELECT * FROM {target}").collect())
    if reader == "pyiceberg":
        from pyiceberg.table import StaticTable

        scan = StaticTable.from_metadata(metadata_file(warehouse, target)).scan()
        if changelog:
            return rows_of(dict(zip(COLUMNS, row)) for row in scan.to_duckdb("changes").execute(query).fetchall())
        return rows_of(scan.to_arrow().to_pylist())
    connection = duckdb_connection()
    connection.execute(f"CREATE VIEW changes AS SELECT * FROM iceberg_scan('{metadata_file(warehouse, target)}')")
    return rows_of(dict(zip(COLUMNS, row)) for row in connection.execute(
        query or f"SELECT {', '.join(COLUMNS)} FROM changes").fetchall())


def reads_without_the_key(reader: str, warehouse: str, target: str) -> None:
    """A query that selects no key column (what a count or a sum does): DuckDB's limit on equality deletes."""
    if reader == "DuckDB":
        duckdb_connection().execute(f"SELECT sum(amount) FROM iceberg_scan('{metadata_file(warehouse, target)}')")


def test_each_reader_reads_each_kind_of_target_as_the_reading_page_says(real_destination, canal, mariadb, spark,
                                                                         spark_settings):
    tables = {kind: TableDef(DB, channel.source.split(".")[1], ORDERS_COLUMNS) for kind, channel in TARGETS.items()}
    real_destination(DB, setup=[f"CREATE TABLE {t.name} (id BIGINT PRIMARY KEY, customer VARCHAR(64), "
                                "amount DECIMAL(12,2), status ENUM('new','paid','shipped','cancelled'), "
                                "created_at DATETIME(3), note TEXT)" for t in tables.values()])
    source = Source(mariadb, DB, tuple(tables.values()), seed=77)
    settings = JobSettings(DB, canal.canal_settings(DB, poll_timeout_ms=50, batch_size=256),
                           tuple(TARGETS.values()), COMMIT)
    job = SyncJob(settings, lambda channel: make_sink(spark, channel, DB, spark_settings))
    job.start()
    try:
        for round_ in range(6):  # inserts, updates, deletes and a key change, over several commits
            for table in tables.values():
                source.insert(table, [source.row(table) for _ in range(40)])
                keys = source.keys(table)
                for key in keys[round_::7]:
                    source.update(table, key, source.row(table, key))
                source.sql(f"DELETE FROM {table.name} WHERE id = %s", keys[round_ * 3][0])
                source.sql(f"UPDATE {table.name} SET id = id + 100000 WHERE id = %s", keys[round_ * 5 + 1][0])
            source.commit()
        last = EntryPosition(*mariadb.last_event_start("Xid"))
        assert job.acks.wait_through(last, 180), f"{job.state} {job.fail_message} {job.stats}"
    finally:
        job.pause()

    deletes = {kind: {row.content for row in spark.sql(f"SELECT content FROM {channel.target}.delete_files").collect()}
               for kind, channel in TARGETS.items()}
    assert deletes == {"upsert, equality deletes": {2}, "upsert, position deletes": {1}, "changelog": set()}

    matrix = page_matrix()
    assert set(matrix) == set(TARGETS), matrix
    for kind, channel in TARGETS.items():
        table = tables[kind]
        expected = rows_of({c: row[c] for c in COLUMNS} for row in source.rows(table))
        for reader in READERS:
            cell = matrix[kind][reader]
            verdict = cell.split(":")[0].split(",")[0].strip()
            assert verdict in ("yes", "no", "with its key"), (kind, reader, cell)
            if verdict == "no":
                with pytest.raises(Exception, match=re.escape(cell.split("`")[1])):
                    read(reader, spark, spark_settings.warehouse, channel.target, channel.mode == "changelog")
                continue
            assert read(reader, spark, spark_settings.warehouse, channel.target,
                        channel.mode == "changelog") == expected, (kind, reader)
            if verdict == "with its key":
                with pytest.raises(Exception, match=re.escape(cell.split("`")[1])):
                    reads_without_the_key(reader, spark_settings.warehouse, channel.target)
            else:
                reads_without_the_key(reader, spark_settings.warehouse, channel.target)
    assert CURRENT_STATE in PAGE.read_text()


def test_the_page_says_which_versions_it_checked():
    import duckdb
    import pyiceberg

    text = PAGE.read_text()
    assert f"pyiceberg {pyiceberg.__version__}" in text and f"DuckDB {duckdb.__version__}" in text

