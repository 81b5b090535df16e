"""A DDL that changes a table's columns reaches its target in stream order (in-memory writers, the dev server).

Rows before the DDL land under the old columns, the DDL is applied stamped
with its own position, rows after it land under the new ones: each a step of
its own, so a failure between two replays from exactly where the target
stands.
"""

from __future__ import annotations

import dataclasses

import pytest

from canalbridge.devkit import DestinationConfig
from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.devkit.workload import Workload, WorkloadSpec
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.job.job import JobState
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import SchemaSettings

from .harness import Harness, job_settings

EventType = entry_pb.EventType
ID = ColumnDef.of("id", "int(11)", is_key=True)
BEFORE = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)")))


def harness_for(server, *, decode_raw: bool = False, key: tuple[str, ...] | None = None, **options) -> Harness:
    workload = Workload(WorkloadSpec(tables=(BEFORE,), row_changes=0))
    settings = job_settings(server, workload)
    if key is not None:
        settings = dataclasses.replace(settings, channels=tuple(dataclasses.replace(c, key=key)
                                                                for c in settings.channels))
    return Harness(server, workload, settings, **{BEFORE.qualified: {"decode_raw": decode_raw, **options}})


def run(server, harness: Harness, entries: list[entry_pb.Entry]) -> None:
    harness.set_entries(entries)
    server.feed("example", entries)
    harness.run_until_acked(30)
    harness.job.pause()
    assert not harness.audit.violations, harness.audit.violations[:3]


def insert(binlog: BinlogWriter, table: TableDef, *rows: dict) -> list[entry_pb.Entry]:
    return [*binlog.open(), binlog.rows(table, EventType.INSERT, [(None, row) for row in rows]), binlog.end()]


def alter(binlog: BinlogWriter, sql: str) -> entry_pb.Entry:
    return binlog.ddl("db", "t", EventType.ALTER, sql)


@pytest.mark.parametrize("decode_raw", [False, True], ids=["decoded", "undecoded"])
def test_rows_land_under_the_columns_of_their_place_in_the_stream(dev_server_factory, decode_raw):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server, decode_raw=decode_raw)
    added = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)"), ColumnDef.of("qty", "int(11)")))
    renamed = TableDef("db", "t", (ID, ColumnDef.of("label", "varchar(8)"), ColumnDef.of("qty", "int(11)")))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    ddl_add = alter(binlog, "ALTER TABLE t ADD COLUMN qty INT")
    entries += [ddl_add, *insert(binlog, added, {"id": 2, "name": "b", "qty": 5})]
    ddl_rename = alter(binlog, "ALTER TABLE t CHANGE name label VARCHAR(8)")
    entries += [ddl_rename, *insert(binlog, renamed, {"id": 3, "label": "c", "qty": 7})]
    run(server, harness, entries)
    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "label": "a"}, ("2",): {"id": "2", "label": "b", "qty": "5"},
                           ("3",): {"id": "3", "label": "c", "qty": "7"}}
    # Each DDL stamped with its own position, between the rows around it.
    assert writer.alterations == [("ALTER TABLE t ADD COLUMN qty INT", EntryPosition.of(ddl_add)),
                                  ("ALTER TABLE t CHANGE name label VARCHAR(8)", EntryPosition.of(ddl_rename))]
    stamps = [commit.end_position for commit in writer.commits]
    assert stamps == sorted(stamps)
    assert harness.job.stats.rollbacks == 0


def test_the_rows_before_a_ddl_and_the_ddl_are_each_stamped_with_their_own_position(dev_server_factory):
    # One Canal batch: the channel applies the rows, then the DDL, then the rows after it.
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server)
    added = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)"), ColumnDef.of("qty", "int(11)")))
    binlog = BinlogWriter()
    first = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    ddl = alter(binlog, "ALTER TABLE t ADD qty INT AFTER name")
    then = insert(binlog, added, {"id": 1, "name": "a2", "qty": 1})
    run(server, harness, [*first, ddl, *then])
    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "name": "a2", "qty": "1"}}
    assert [c.end_position for c in writer.commits][:2] == [EntryPosition.of(first[1]), EntryPosition.of(ddl)]


@pytest.mark.parametrize("drop", [False, True], ids=["kept", "dropped"])
def test_a_dropped_column_is_kept_in_the_target_unless_the_job_drops_it(dev_server_factory, drop):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(BEFORE,), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), schema=SchemaSettings("drop" if drop else "keep"))
    harness = Harness(server, workload, settings, **{BEFORE.qualified: {"columns": ("id", "name")}})
    dropped = TableDef("db", "t", (ID,))
    binlog = BinlogWriter()
    entries = [*insert(binlog, BEFORE, {"id": 1, "name": "a"}), alter(binlog, "ALTER TABLE t DROP COLUMN name"),
               *insert(binlog, dropped, {"id": 2})]
    run(server, harness, entries)
    writer = harness.writers["db.t"]
    assert writer.columns == (("id",) if drop else ("id", "name"))
    assert writer.rows == {("1",): {"id": "1"} if drop else {"id": "1", "name": "a"}, ("2",): {"id": "2"}}


def test_a_ddl_that_fails_after_the_rows_before_it_landed_is_replayed_exactly(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server, fail_alter_at={1})
    added = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)"), ColumnDef.of("qty", "int(11)")))
    binlog = BinlogWriter()
    first = insert(binlog, BEFORE, {"id": 1, "name": "a"}, {"id": 2, "name": "b"})
    ddl = alter(binlog, "ALTER TABLE t ADD qty INT")
    run(server, harness, [*first, ddl, *insert(binlog, added, {"id": 3, "name": "c", "qty": 3})])
    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "name": "a"}, ("2",): {"id": "2", "name": "b"},
                           ("3",): {"id": "3", "name": "c", "qty": "3"}}
    assert sum(c.rows for c in writer.commits) == 3  # the rows before the DDL landed once, not again
    assert writer.alterations == [("ALTER TABLE t ADD qty INT", EntryPosition.of(ddl))]
    assert harness.job.stats.rollbacks >= 1


def test_a_ddl_that_changes_no_column_and_one_that_cannot_be_read_but_keeps_them_are_skipped(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server)
    binlog = BinlogWriter()
    entries = [*insert(binlog, BEFORE, {"id": 1, "name": "a"}), alter(binlog, "ALTER TABLE t ADD INDEX i (name)"),
               alter(binlog, "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4"),
               *insert(binlog, BEFORE, {"id": 2, "name": "b"})]
    run(server, harness, entries)
    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "name": "a"}, ("2",): {"id": "2", "name": "b"}}
    assert writer.alterations == []


@pytest.mark.parametrize(("sql", "says"), [
    ("ALTER ONLINE TABLE t ADD qty INT", "canalbridge could not read that DDL"),
    ("ALTER TABLE t ADD weight INT", "are not the ones the DDL leaves (id, name, weight)"),
], ids=["unreadable", "cross-check"])
def test_a_row_whose_columns_the_ddl_does_not_explain_pauses_the_job_naming_both(dev_server_factory, sql, says):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server)
    added = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)"), ColumnDef.of("qty", "int(11)")))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    ddl = alter(binlog, sql)
    late = insert(binlog, added, {"id": 2, "name": "b", "qty": 2})
    entries += [ddl, *late]
    harness.set_entries(entries)
    server.feed("example", entries)
    harness.job.start()
    assert harness.job.wait_state(JobState.PAUSED, 30), harness.job.state
    text = harness.job.fail_message.text
    assert f"table db.t at binlog position {EntryPosition.of(late[1])}" in text, text
    assert f"after the DDL {sql!r} at {EntryPosition.of(ddl)}" in text and says in text, text
    assert harness.writers["db.t"].rows == {("1",): {"id": "1", "name": "a"}}
    assert server.cursors("example").ack < server.cursors("example").put


def test_a_channel_with_an_explicit_columns_list_is_not_altered_and_pauses_when_rows_outgrow_it(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(BEFORE,), row_changes=0))
    settings = job_settings(server, workload)
    channel = dataclasses.replace(settings.channels[0], columns=("id", "customer_name"))
    harness = Harness(server, workload, dataclasses.replace(settings, channels=(channel,)))
    added = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)"), ColumnDef.of("qty", "int(11)")))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    ddl = alter(binlog, "ALTER TABLE t ADD qty INT")
    entries += [ddl, *insert(binlog, added, {"id": 2, "name": "b", "qty": 2})]
    harness.set_entries(entries)
    server.feed("example", entries)
    harness.job.start()
    assert harness.job.wait_state(JobState.PAUSED, 30), harness.job.state
    text = harness.job.fail_message.text
    assert "row has 3 columns (id int key, name varchar(8), qty int), earlier rows had 2" in text, text
    assert f"after the DDL 'ALTER TABLE t ADD qty INT' at {EntryPosition.of(ddl)}" in text, text
    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "customer_name": "a"}} and writer.alterations == []


def test_two_column_changes_in_a_row_are_both_expected_of_the_next_row(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server, decode_raw=True)
    both = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)"), ColumnDef.of("c", "int(11)"),
                                ColumnDef.of("d", "int(11)")))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    entries += [alter(binlog, "ALTER TABLE t ADD c INT"), alter(binlog, "ALTER TABLE t ADD d INT")]
    entries += insert(binlog, both, {"id": 2, "name": "b", "c": 3, "d": 4})
    run(server, harness, entries)
    assert harness.writers["db.t"].rows[("2",)] == {"id": "2", "name": "b", "c": "3", "d": "4"}
    assert len(harness.writers["db.t"].alterations) == 2


@pytest.mark.parametrize("decode_raw", [False, True], ids=["decoded", "undecoded"])
def test_rows_before_a_ddl_that_failed_to_commit_are_replayed_under_the_old_columns(dev_server_factory, decode_raw):
    # The mapper had taken the DDL in when the rows before it failed: the replay starts before it again.
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server, decode_raw=decode_raw, fail_commit_at={1})
    added = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)"), ColumnDef.of("qty", "int(11)")))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    entries += [alter(binlog, "ALTER TABLE t ADD qty INT"), *insert(binlog, added, {"id": 2, "name": "b", "qty": 2})]
    run(server, harness, entries)
    writer = harness.writers["db.t"]
    assert writer.rows == {("1",): {"id": "1", "name": "a"}, ("2",): {"id": "2", "name": "b", "qty": "2"}}
    assert harness.job.stats.rollbacks >= 1 and harness.job.state is JobState.PAUSED  # (paused by the test)


@pytest.mark.parametrize("truncate", ["ignore", "apply"])
def test_a_truncate_is_ignored_unless_the_job_applies_it(dev_server_factory, truncate):
    server = dev_server_factory(DestinationConfig("example"))
    workload = Workload(WorkloadSpec(tables=(BEFORE,), row_changes=0))
    settings = dataclasses.replace(job_settings(server, workload), schema=SchemaSettings(truncate=truncate))
    harness = Harness(server, workload, settings)
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"}, {"id": 2, "name": "b"})
    ddl = binlog.ddl("db", "t", EventType.TRUNCATE, "TRUNCATE TABLE t")
    entries += [ddl, *insert(binlog, BEFORE, {"id": 3, "name": "c"})]
    run(server, harness, entries)
    writer = harness.writers["db.t"]
    kept = {} if truncate == "apply" else {("1",): {"id": "1", "name": "a"}, ("2",): {"id": "2", "name": "b"}}
    assert writer.rows == {**kept, ("3",): {"id": "3", "name": "c"}}
    assert writer.alterations == ([("TRUNCATE TABLE t", EntryPosition.of(ddl))] if truncate == "apply" else [])


@pytest.mark.parametrize("decode_raw", [False, True], ids=["decoded", "undecoded"])
def test_a_primary_key_change_keys_the_rows_after_it_by_the_new_key(dev_server_factory, decode_raw):
    # Issue 33, hole 2: the DDL read as no change, the channel kept keying rows by `id`, and (1, 'b') replaced
    # (1, 'a') although MySQL holds both under the key (id, name).
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server, decode_raw=decode_raw)
    rekeyed = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)", is_key=True)))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    change = alter(binlog, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, name)")
    entries += [change, *insert(binlog, rekeyed, {"id": 1, "name": "b"}, {"id": 2, "name": "c"})]
    run(server, harness, entries)
    writer = harness.writers["db.t"]
    assert writer.rows == {("1", "a"): {"id": "1", "name": "a"}, ("1", "b"): {"id": "1", "name": "b"},
                           ("2", "c"): {"id": "2", "name": "c"}}
    assert writer.alterations == [("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, name)",
                                   EntryPosition.of(change))]


@pytest.mark.parametrize("decode_raw", [False, True], ids=["decoded", "undecoded"])
def test_rows_whose_key_changed_with_no_ddl_read_pause_the_job_naming_it(dev_server_factory, decode_raw):
    # The safety net: a key change canalbridge did not read (here the DDL never came) never collapses rows.
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server, decode_raw=decode_raw)
    rekeyed = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)", is_key=True)))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"}) + insert(binlog, rekeyed, {"id": 1, "name": "b"})
    harness.set_entries(entries)
    server.feed("example", entries)
    harness.job.start()
    assert harness.job.wait_state(JobState.PAUSED, 30), harness.job.state
    message = str(harness.job.fail_message)
    assert "table db.t" in message and "the source's primary key changed" in message
    assert "(id int key, name varchar(8) key)" in message
    assert harness.writers["db.t"].rows.get(("1",)) in (None, {"id": "1", "name": "a"})  # never (1, 'b')


def test_a_channel_with_its_own_key_keeps_it_through_a_source_key_change(dev_server_factory):
    server = dev_server_factory(DestinationConfig("example"))
    harness = harness_for(server, key=("id",))
    rekeyed = TableDef("db", "t", (ID, ColumnDef.of("name", "varchar(8)", is_key=True)))
    binlog = BinlogWriter()
    entries = insert(binlog, BEFORE, {"id": 1, "name": "a"})
    entries += [alter(binlog, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, name)"),
                *insert(binlog, rekeyed, {"id": 1, "name": "b"})]
    run(server, harness, entries)
    assert harness.writers["db.t"].rows == {("1",): {"id": "1", "name": "b"}}  # keyed by `id`, as configured
    assert harness.writers["db.t"].alterations == []
