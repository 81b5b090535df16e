"""Nessie's Iceberg REST catalog commits the tables of a multi-table commit as one: every table or none, in one
Nessie commit whose hash a reader can pin. The server a job whose targets move together would publish through;
the commits here are the REST protocol's own (``POST /v1/{prefix}/transactions/commit``). Nessie ignores
Iceberg's table branches, which canalbridge holds writes on: a target there stops at the first held write,
saying so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from canalbridge.sync.settings import ChannelSettings
from spark_sink import catalog_commit, equality
from spark_sink.errors import TargetTableError
from spark_sink.sink import make_sink
from tests.infra.nessie import NessieServer, RestError
from tests.infra.s3proxy import S3ProxyServer, store_client_in
from tests.integration.spark.test_held_steps import staged
from tests.integration.spark.test_position_readback import JOB, position
from tests.integration.spark.test_position_readback import commit as commit_rows

pytestmark = [pytest.mark.real]

NAMESPACE = "ledger"
TABLES = ("acct", "entries")
SCHEMA = {"type": "struct", "schema-id": 0,
          "fields": [{"id": 1, "name": "id", "required": True, "type": "long"}]}


@pytest.fixture(scope="module")
def nessie(tmp_path_factory) -> Iterator[NessieServer]:
    root = tmp_path_factory.mktemp("nessie")
    with S3ProxyServer(root / "s3") as store, NessieServer(root / "nessie", store) as server:
        server.iceberg("POST", "namespaces", {"namespace": [NAMESPACE]})
        for name in TABLES:
            server.iceberg("POST", f"namespaces/{NAMESPACE}/tables",
                           {"name": name, "schema": SCHEMA, "stage-create": False})
        yield server


def uuids(nessie: NessieServer) -> dict[str, str]:
    return {name: nessie.table(NAMESPACE, name)["table-uuid"] for name in TABLES}


def rounds(nessie: NessieServer, at: str | None = None) -> dict[str, str | None]:
    """Each table's ``round`` property, on main now or at the commit ``at``."""
    return {name: nessie.table(NAMESPACE, name, at=at)["properties"].get("round") for name in TABLES}


def set_round(name: str, uuid: str, value: int) -> dict[str, Any]:
    """One table's change of a multi-table commit: its ``round`` set, if the table is still ``uuid``."""
    return {"identifier": {"namespace": [NAMESPACE], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
            "updates": [{"action": "set-properties", "updates": {"round": str(value)}}]}


def commit(nessie: NessieServer, *changes: dict[str, Any]) -> None:
    nessie.iceberg("POST", "transactions/commit", {"table-changes": list(changes)})


def test_a_multi_table_commit_lands_every_table_in_one_nessie_commit_or_none(nessie):
    ids = uuids(nessie)
    before, earlier = nessie.head(), rounds(nessie)
    assert earlier["acct"] != "1"
    commit(nessie, *[set_round(name, ids[name], 1) for name in TABLES])
    after = nessie.head()
    assert rounds(nessie, at=after) == {"acct": "1", "entries": "1"}
    assert rounds(nessie, at=before) == earlier
    history = nessie.history(2)
    assert [entry["commitMeta"]["hash"] for entry in history] == [after, before], "one Nessie commit for both"

    # The second table's requirement fails: the first table's change is not applied either.
    with pytest.raises(RestError) as refused:
        commit(nessie, set_round("acct", ids["acct"], 2), set_round("entries", ids["acct"], 2))
    assert refused.value.status == 409
    assert nessie.head() == after
    assert rounds(nessie) == {"acct": "1", "entries": "1"}


def test_a_reader_pinned_to_one_commit_reads_every_table_as_it_left_them_while_main_moves(nessie):
    ids = uuids(nessie)
    commit(nessie, *[set_round(name, ids[name], 10) for name in TABLES])
    pinned = nessie.head()
    first = nessie.table(NAMESPACE, "acct", at=pinned)["properties"]["round"]

    # A commit lands between the reader's two loads.
    commit(nessie, *[set_round(name, ids[name], 11) for name in TABLES])

    assert nessie.table(NAMESPACE, "entries", at=pinned)["properties"]["round"] == first == "10"
    # Loaded from main instead, the second table is already past the first one the reader loaded.
    assert nessie.table(NAMESPACE, "entries")["properties"]["round"] == "11"


def nessie_catalog_in(spark, nessie: NessieServer) -> None:
    """The session's catalog ``nessie`` on the server; uncached, so that each read sees the commits of others."""
    store_client_in(spark)
    catalog = "spark.sql.catalog.nessie"
    for key, value in {catalog: "org.apache.iceberg.spark.SparkCatalog", f"{catalog}.type": "rest",
                       f"{catalog}.uri": nessie.uri, f"{catalog}.s3.access-key-id": nessie.store.access_key,
                       f"{catalog}.s3.secret-access-key": nessie.store.secret_key,
                       f"{catalog}.cache-enabled": "false"}.items():
        spark.conf.set(key, value)


def changes(spark, *rows: tuple[int, str | None]):
    """Each key's last change as the equality path takes it: a ``None`` name deletes the key."""
    return spark.createDataFrame([(key, name, "D" if name is None else "U") for key, name in rows],
                                 "id int, name string, _op string")


def rows_of(spark, target: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(f"SELECT id, name FROM {target} ORDER BY id").collect()]


def objects(nessie: NessieServer) -> set[Path]:
    return {path for path in nessie.store.bucket_dir.rglob("*") if path.is_file()}


@pytest.mark.spark
def test_staged_commits_of_two_targets_land_in_one_nessie_commit_and_a_refused_one_in_neither(
        nessie, spark, spark_settings):
    nessie_catalog_in(spark, nessie)
    assert catalog_commit.unsupported(spark, "nessie") is None
    local = catalog_commit.unsupported(spark, spark_settings.catalog)
    assert local is not None and "not an Iceberg REST catalog (type hadoop)" in local
    targets = [f"nessie.{NAMESPACE}.staged_{name}" for name in TABLES]
    sinks = [make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings) for target in targets]
    for sink in sinks:
        commit_rows(sink, "c1", position(100), (1, "a"), (2, "b"))
    assert all(equality.enable(spark, target, ["id"]) is None for target in targets)

    head = nessie.head()
    staged = [equality.stage(spark, target, changes(spark, (1, "a2"), (2, None), (3, "c")), ["id"],
                             {"canalbridge.test": "together"}) for target in targets]
    assert [(each.written.rows, each.written.keys) for each in staged] == [(2, 3)] * 2
    assert nessie.head() == head, "staging commits nothing"
    assert all(rows_of(spark, target) == [(1, "a"), (2, "b")] for target in targets)

    catalog_commit.publish(spark, staged)
    assert [entry["commitMeta"]["hash"] for entry in nessie.history(2)][1] == head, "one Nessie commit for both"
    for target, each in zip(targets, staged, strict=True):
        assert rows_of(spark, target) == [(1, "a2"), (3, "c")]
        main = spark.sql(f"SELECT snapshot_id, summary FROM {target}.snapshots ORDER BY committed_at DESC").first()
        assert (main["snapshot_id"], main["summary"]["canalbridge.test"]) == (each.snapshot_id, "together")

    # The second target moves on after both were staged: the catalog refuses the commit, for both.
    before = objects(nessie)
    staged = [equality.stage(spark, target, changes(spark, (4, "d")), ["id"], {}) for target in targets]
    written = objects(nessie) - before
    commit_rows(sinks[1], "c2", position(200), (5, "e"))
    head = nessie.head()
    with pytest.raises(catalog_commit.PublishError, match=r"refused it: CommitFailedException") as refused:
        catalog_commit.publish(spark, staged)
    assert refused.value.refused and refused.value.targets == tuple(targets)
    assert nessie.head() == head
    assert rows_of(spark, targets[0]) == [(1, "a2"), (3, "c")]
    assert rows_of(spark, targets[1]) == [(1, "a2"), (3, "c"), (5, "e")]
    for each in staged:
        each.discard()
    assert written and not written & objects(nessie), "discarding removes every file staging wrote"


@pytest.mark.spark
def test_a_target_in_nessie_stops_at_its_first_held_write_naming_the_branch_nessie_ignores(
        nessie, spark, spark_settings):
    nessie_catalog_in(spark, nessie)
    sink = make_sink(spark, ChannelSettings("db.t", f"nessie.{NAMESPACE}.held"), JOB, spark_settings)
    commit_rows(sink, "c1", position(100), (1, "a"))  # one commit straight onto main: Nessie takes it

    with pytest.raises(TargetTableError, match=r"the branch canalbridge-staging-job-readback that canalbridge just "
                                               r"made on it is not in the table its catalog returns: the catalog "
                                               r"does not keep Iceberg's table branches") as stopped:
        staged(sink, ("2", "b")).apply(position(200), "c2~1", publish=False)
    assert f"nessie.{NAMESPACE}.held" in str(stopped.value)
    assert spark.sql(f"SELECT count(*) FROM nessie.{NAMESPACE}.held").first()[0] == 1  # the held row is not on main
