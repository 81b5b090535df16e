"""A target shaped by its channel: columns left out, masked and computed, rows kept by a filter, alike for Canal's
rows (decoded in Python or in the JVM) and a snapshot's chunks; an update that moves a row out of the filter
deletes it, one that moves it back in inserts it. The expected target is computed here from the source's rows,
with Python's own HMAC and dates, not the bridge's code."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import hmac
from decimal import Decimal as D

import pytest

from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.settings import ChannelSettings
from canalbridge.sync.snapshot.chunk_window import SnapshotChunk
from canalbridge.sync.snapshot.progress import TableProgress
from spark_sink.errors import TargetTableError
from spark_sink.identifiers import quote_table
from spark_sink.shaping import Shaping
from spark_sink.sink import make_sink
from tests.integration.spark.test_equality_deletes import files_by_content

EventType = entry_pb.EventType
JOB = "job-shaping"
SALT = "a salt of the test, long enough"
T = TableDef("db", "orders", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("email", "varchar(64)"),
                              ColumnDef.of("status", "varchar(16)"), ColumnDef.of("note", "varchar(32)"),
                              ColumnDef.of("created", "datetime"), ColumnDef.of("amount", "decimal(10,2)")))
COLUMNS = tuple(SourceColumn(c.name, c.mysql_type.declared, 0, c.is_key) for c in T.columns)
SHAPED = ChannelSettings("db.orders", "lake.shaping.orders", exclude=("note",), mask=("email",),
                         computed={"order_day": "to_date(created)", "cents": "cast(amount * 100 AS bigint)"},
                         row_filter="status <> 'cancelled'")


def order(key: int, status: str, email: str | None = None, day: int = 1) -> dict:
    return {"id": key, "email": email if email is not None else f"u{key}@example.com", "status": status,
            "note": f"note {key}", "created": datetime.datetime(2026, 12, day, 10, 30), "amount": D(f"{key}.25")}


def masked(value: str) -> str:
    return hmac.new(SALT.encode(), value.encode(), hashlib.sha256).hexdigest()


def expected(source: dict[int, dict]) -> list[tuple]:
    """The target the documentation promises for ``source``'s rows: no note, email masked, the computed columns
    after the others, cancelled orders left out."""
    return sorted((row["id"], masked(row["email"]), row["status"], row["created"], row["amount"],
                   row["created"].date(), int(row["amount"] * 100))
                  for row in source.values() if row["status"] != "cancelled")


@pytest.fixture
def salted(spark_settings):
    return dataclasses.replace(spark_settings, mask_salt=SALT)


class Stream:
    """Canal's rows for one writer, decoded by the channel's thread or handed to the JVM undecoded."""

    def __init__(self, writer, undecoded: bool) -> None:
        self.writer, self.undecoded = writer, undecoded
        self.binlog = BinlogWriter()
        self.mapper = RowMapper("db.orders", None, before_images=writer.before_images())

    def send(self, kind: EventType, *images: tuple[dict | None, dict | None]) -> EntryPosition:
        from canalbridge.devkit.entries import row_run

        entry = self.binlog.rows(T, kind, list(images))
        changed = self.mapper.map(entry_pb.RowChange.FromString(entry.storeValue), EntryPosition.of(entry))
        if self.undecoded:
            self.writer.send_raw(self.mapper.raw_batch(row_run([entry])))
        else:
            self.writer.send(self.mapper.batch(changed))
        return EntryPosition.of(entry)


def chunk_of(spark, *rows: dict) -> SnapshotChunk:
    text = [tuple(None if row[c.name] is None else str(row[c.name]) for c in T.columns) for row in rows]
    frame = spark.createDataFrame(text, ", ".join(f"c{index} string" for index in range(len(T.columns))))
    return SnapshotChunk(COLUMNS, frame, len(rows), TableProgress("snap-1", "db.orders", ("11",), ("11",)))


def target_rows(spark, target: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.table(quote_table(target)).collect())


@pytest.mark.parametrize(("undecoded", "deletes"), [(False, "position"), (True, "equality")],
                         ids=["decoded-position", "undecoded-equality"])
def test_an_upsert_target_holds_the_rows_the_filter_keeps_shaped_as_the_channel_says(
        spark, salted, undecoded, deletes):
    channel = dataclasses.replace(SHAPED, target=f"{SHAPED.target}_{deletes}")
    sink = make_sink(spark, channel, JOB, dataclasses.replace(salted, upsert_deletes=deletes))
    stream = Stream(sink.writer, undecoded)
    source = {key: order(key, status) for key, status in ((1, "paid"), (2, "cancelled"), (3, "paid"), (4, "new"))}
    snapshot = {key: order(key, status, day=2) for key, status in ((10, "paid"), (11, "cancelled"))}

    sink.writer.begin()
    stream.send(EventType.INSERT, *[(None, row) for row in source.values()])
    close = stream.send(EventType.INSERT, (None, order(5, "paid")))
    sink.writer.send_chunk(stream.mapper.chunk_batch(chunk_of(spark, *snapshot.values()), ["id"], [], close))
    source.update({5: order(5, "paid"), **snapshot})
    sink.writer.commit(close, "l1")
    assert target_rows(spark, channel.target) == expected(source)
    assert spark.table(quote_table(channel.target)).columns == ["id", "email", "status", "created", "amount",
                                                                "order_day", "cents"]

    # 1 and 10 leave the filter, 2 and 11 come back into it, 3 goes, 4 gets a new email.
    sink.writer.begin()
    changed = {1: order(1, "cancelled"), 2: order(2, "paid"), 4: order(4, "new", email="four@example.com"),
               10: order(10, "cancelled", day=2), 11: order(11, "paid", day=2)}
    stream.send(EventType.UPDATE, *[(source[key], row) for key, row in changed.items()])
    end = stream.send(EventType.DELETE, (source[3], None))
    source.update(changed)
    del source[3]
    sink.writer.commit(end, "l2")
    assert target_rows(spark, channel.target) == expected(source)
    assert sink.writer.mode.equality_deletes == (deletes == "equality")
    if deletes == "equality":  # (the stream's commit: the chunk's took the position path)
        assert "equality deletes" in files_by_content(spark, channel.target)


def test_a_changelog_target_records_the_changes_the_filter_keeps(spark, salted):
    channel = dataclasses.replace(SHAPED, target="lake.shaping.orders_changelog", mode="changelog")
    sink = make_sink(spark, channel, JOB, salted)
    stream = Stream(sink.writer, undecoded=False)
    sink.writer.begin()
    stream.send(EventType.INSERT, (None, order(1, "paid")), (None, order(2, "cancelled")))
    end = stream.send(EventType.UPDATE, (order(1, "paid"), order(1, "cancelled")),
                      (order(2, "cancelled"), order(2, "paid")))
    sink.writer.commit(end, "l1")
    recorded = sorted((row["id"], row["_op"], row["email"], row["order_day"]) for row in
                      spark.table(quote_table(channel.target)).collect())
    day = datetime.date(2026, 12, 1)
    assert recorded == [(1, "+I", masked("u1@example.com"), day), (1, "-U", masked("u1@example.com"), day),
                        (2, "+U", masked("u2@example.com"), day)]
    assert "note" not in spark.table(quote_table(channel.target)).columns


def first_commit(spark, salted, **shaping) -> None:
    """One order through a new sink of ``SHAPED`` changed by ``shaping``, into a target of its own (or
    ``shaping["target"]``)."""
    channel = dataclasses.replace(SHAPED, **{"target": f"lake.shaping.refused_{'_'.join(shaping)}", **shaping})
    sink = make_sink(spark, channel, JOB, salted)
    sink.writer.begin()
    sink.writer.commit(Stream(sink.writer, undecoded=False).send(EventType.INSERT, (None, order(1, "paid"))), "l1")


def test_an_entry_spark_cannot_read_stops_the_channel_naming_it(spark, salted):
    with pytest.raises(TargetTableError, match=r"computed.day = 'to_date\(created' is not a Spark SQL expression"):
        make_sink(spark, dataclasses.replace(SHAPED, computed={"day": "to_date(created"}), JOB, salted)
    # A column the rows do not have (renamed by a DDL, say): the commit stops before the table is made.
    with pytest.raises(TargetTableError, match=r"computed.day = 'to_date\(created_at\)' does not fit the rows"):
        first_commit(spark, salted, computed={"day": "to_date(created_at)"})
    assert not spark.catalog.tableExists("lake.shaping.refused_computed")
    with pytest.raises(TargetTableError, match=r"row_filter = 'amount \+ 1' is not a predicate"):
        first_commit(spark, salted, row_filter="amount + 1")
    with pytest.raises(TargetTableError, match=r"mask names mail, which neither the rows .* nor the target have"):
        first_commit(spark, salted, mask=("mail",))  # (a typo: the column it meant would go through in clear)


def test_a_target_made_before_its_shaping_takes_its_computed_columns_but_not_values_it_holds_in_clear(
        spark, salted):
    target = "lake.shaping.made_before"
    first_commit(spark, salted, target=target, exclude=None, mask=None, computed={}, row_filter=None)
    for shaping, refused in (({"mask": ("email",)}, "it holds column email in clear, written before mask named it"),
                             ({"exclude": ("note",)}, "it has column note, which exclude leaves out")):
        with pytest.raises(TargetTableError, match=refused):
            first_commit(spark, salted, target=target, **{"exclude": None, "mask": None, "computed": {}, **shaping})
    first_commit(spark, salted, target=target, exclude=None, mask=None, row_filter=None)
    assert sorted(tuple(row) for row in spark.sql(f"SELECT id, order_day FROM {target}").collect()) == [
        (1, datetime.date(2026, 12, 1))], "(rows from before get the computed column: the commit rewrote this one)"

    masked_target = "lake.shaping.salted"
    first_commit(spark, salted, target=masked_target)
    with pytest.raises(TargetTableError, match="its masked values were keyed by another salt"):
        first_commit(spark, dataclasses.replace(salted, mask_salt="another salt, sixteen or more"),
                     target=masked_target)


def test_masked_bytes_hash_as_hex_and_the_salt_stays_out_of_the_plan(spark, salted):
    shaping = Shaping(ChannelSettings("db.t", "lake.shaping.bytes", mask=("b",)), SALT)
    frame = spark.createDataFrame([(1, bytearray(b"\xff\x00")), (2, bytearray(b"\xfe\x00"))], "id int, b binary")
    shaped = shaping.apply(frame, deletes=False)
    assert sorted(tuple(row) for row in shaped.collect()) == [(1, masked("FF00")), (2, masked("FE00"))]
    assert SALT not in shaped._jdf.queryExecution().toString()


@pytest.mark.parametrize("deletes", ["position", "equality"])
def test_a_masked_key_still_upserts_and_deletes_by_its_masked_value(spark, salted, deletes):
    channel = ChannelSettings("db.orders", f"lake.shaping.masked_key_{deletes}", mask=("id", "email"))
    sink = make_sink(spark, channel, JOB, dataclasses.replace(salted, upsert_deletes=deletes))
    stream = Stream(sink.writer, undecoded=False)
    sink.writer.begin()
    end = stream.send(EventType.INSERT, *[(None, order(key, "new")) for key in (1, 2, 3)])
    sink.writer.commit(end, "l1")
    sink.writer.begin()
    stream.send(EventType.UPDATE, (order(1, "new"), order(1, "paid")))
    end = stream.send(EventType.DELETE, (order(2, "new"), None))
    sink.writer.commit(end, "l2")
    held = sorted((row["id"], row["status"]) for row in spark.table(quote_table(channel.target)).collect())
    assert held == sorted([(masked("1"), "paid"), (masked("3"), "new")])
    assert sink.writer.mode.equality_deletes == (deletes == "equality")
