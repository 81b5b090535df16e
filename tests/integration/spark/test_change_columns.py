"""What an upsert target records about each row's last change (``metadata``), soft deletes that keep a deleted row
marked and bring it back with a later insert, and the type 2 history the reading page's view makes of a changelog
target. Expected rows are worked out here from the changes sent and their binlog positions."""

from __future__ import annotations

import dataclasses
import datetime
import re
from pathlib import Path

import pytest

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from tests.integration.spark.test_shaping import JOB, Stream, chunk_of, order

EventType = entry_pb.EventType
READING = Path(__file__).parents[3] / "docs" / "guide" / "reading.md"


def at(position: EntryPosition) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(position.execute_time_ms / 1000)  # (as Spark hands a timestamp back)


def where(position: EntryPosition) -> str:
    return f"{position.journal}:{position.offset}"


@pytest.mark.parametrize(("undecoded", "deletes"), [(False, "position"), (True, "equality")],
                         ids=["decoded-position", "undecoded-equality"])
def test_an_upsert_target_records_each_rows_last_change_and_keeps_deleted_rows_marked(
        spark, spark_settings, undecoded, deletes):
    channel = ChannelSettings("db.orders", f"lake.change_columns.orders_{deletes}",
                              metadata=("op", "source_time", "position"), deletes="soft")
    sink = make_sink(spark, channel, JOB, dataclasses.replace(spark_settings, upsert_deletes=deletes))
    stream = Stream(sink.writer, undecoded)

    def held() -> dict[int, tuple]:
        frame = spark.table(quote_table(channel.target))
        return {row["id"]: (row["email"], row["_source_op"], row["_source_time"], row["_source_position"],
                            row["_is_deleted"], row["_deleted_at"]) for row in frame.collect()}

    sink.writer.begin()
    inserted = stream.send(EventType.INSERT, *[(None, order(key, "new")) for key in (1, 2, 3)])
    sink.writer.send_chunk(stream.mapper.chunk_batch(chunk_of(spark, order(10, "paid")), ["id"], [], inserted))
    sink.writer.commit(inserted, "l1")
    snapshot_row = ("u10@example.com", "snapshot", at(inserted), where(inserted), False, None)
    assert held() == {key: (f"u{key}@example.com", "insert", at(inserted), where(inserted), False, None)
                      for key in (1, 2, 3)} | {10: snapshot_row}

    sink.writer.begin()
    updated = stream.send(EventType.UPDATE, (order(1, "new"), order(1, "paid", email="one@example.com")),
                          (order(3, "new"), {**order(3, "new"), "id": 4}))
    deleted = stream.send(EventType.DELETE, (order(2, "new"), None))
    sink.writer.commit(deleted, "l2")
    # The deleted rows keep their last values, whole: 2 deleted, 3 moved to key 4.
    assert held() == {1: ("one@example.com", "update", at(updated), where(updated), False, None),
                      2: ("u2@example.com", "delete", at(deleted), where(deleted), True, at(deleted)),
                      3: ("u3@example.com", "delete", at(updated), where(updated), True, at(updated)),
                      4: ("u3@example.com", "update", at(updated), where(updated), False, None), 10: snapshot_row}

    sink.writer.begin()
    back = stream.send(EventType.INSERT, (None, order(2, "new", email="two@example.com")))
    sink.writer.commit(back, "l3")
    assert held()[2] == ("two@example.com", "insert", at(back), where(back), False, None)
    assert spark.table(quote_table(channel.target)).count() == 5  # (one row per key, deleted or not)


def test_metadata_and_soft_deletes_join_a_target_made_without_them(spark, spark_settings):
    target = "lake.change_columns.later"
    stream_of = lambda sink: Stream(sink.writer, undecoded=False)  # noqa: E731
    sink = make_sink(spark, ChannelSettings("db.orders", target), JOB, spark_settings)
    sink.writer.begin()
    sink.writer.commit(stream_of(sink).send(EventType.INSERT, (None, order(1, "new")), (None, order(2, "new"))), "l1")

    sink = make_sink(spark, ChannelSettings("db.orders", target, metadata=("op",), deletes="soft"), JOB,
                     spark_settings)
    sink.writer.begin()
    sink.writer.commit(stream_of(sink).send(EventType.DELETE, (order(2, "new"), None)), "l2")
    rows = sorted((row["id"], row["_source_op"], row["_is_deleted"]) for row in spark.table(target).collect())
    assert rows == [(1, None, None), (2, "delete", True)]  # (rows from before: NULL in the new columns)


def history_view() -> str:
    """The view the reading page gives for a changelog's history, as written there."""
    found = re.search(r"```sql\n(CREATE OR REPLACE TEMPORARY VIEW orders_history AS\n.*?)```", READING.read_text(),
                      re.S)
    assert found, "the reading page's history view"
    return found.group(1)


def test_the_reading_pages_history_view_gives_each_rows_versions(spark, spark_settings):
    target = "lake.change_columns.orders_changes"
    sink = make_sink(spark, ChannelSettings("db.orders", target, mode="changelog"), JOB, spark_settings)
    stream = Stream(sink.writer, undecoded=False)
    sink.writer.begin()
    first = stream.send(EventType.INSERT, (None, order(1, "new")), (None, order(2, "new")))
    sink.writer.send_chunk(stream.mapper.chunk_batch(chunk_of(spark, order(10, "paid")), ["id"], [], first))
    sink.writer.commit(first, "l1")
    stream.binlog.clock = lambda: first.execute_time_ms / 1000 + 60  # (each commit a minute later)
    sink.writer.begin()
    paid = stream.send(EventType.UPDATE, (order(1, "new"), order(1, "paid")))
    gone = stream.send(EventType.DELETE, (order(2, "new"), None))
    sink.writer.commit(gone, "l2")
    stream.binlog.clock = lambda: first.execute_time_ms / 1000 + 120
    sink.writer.begin()
    moved = stream.send(EventType.UPDATE, (order(1, "paid"), {**order(1, "paid"), "id": 3}))
    back = stream.send(EventType.INSERT, (None, order(2, "again")))
    sink.writer.commit(back, "l3")

    spark.sql(history_view().replace("lake.shop.orders_changes", target))
    versions = sorted(tuple(row) for row in spark.table("orders_history").collect())
    assert versions == sorted([
        (1, "u1@example.com", "new", at(first), at(paid), False), (1, "u1@example.com", "paid", at(paid), at(moved),
                                                                    False),
        (2, "u2@example.com", "new", at(first), at(gone), False), (2, "u2@example.com", "again", at(back), None, True),
        (3, "u1@example.com", "paid", at(moved), None, True), (10, "u10@example.com", "paid", at(first), None, True)])
