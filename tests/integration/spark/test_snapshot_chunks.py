"""A snapshot chunk in an Iceberg target: applied at its place among the transaction's changes, without the keys
its window noted, compared as typed keys, and its progress stamped with the commit and every later one; in a
changelog, as snapshot rows (``+S``) at its close signal. A chunk that read its key span whole removes the
target's rows in it that the source lacks.
"""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef, row_run
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.source_db.chunks import KeyRange
from canalbridge.sync.model.changes import SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.schema.rows import RowMapper
from canalbridge.sync.settings import ChannelSettings
from canalbridge.sync.snapshot.chunk_window import SnapshotChunk
from canalbridge.sync.snapshot.progress import TableProgress
from spark_sink.identifiers import quote_table
from spark_sink.sink import make_sink
from spark_sink.upsert import _key_bound

EventType = entry_pb.EventType
JOB = "job-chunks"
# A decimal key: the chunk's text (as the source prints it) and Canal's may differ, the typed values do not.
T = TableDef("db", "t", (ColumnDef.of("id", "decimal(6,2)", is_key=True), ColumnDef.of("name", "varchar(8)")))
COLUMNS = (SourceColumn("id", "decimal(6,2)", 3, True), SourceColumn("name", "varchar(8)", 12, False))
PROGRESS = TableProgress("snap-1", "db.t", ("9.00",), ("4.00",))


def rows(spark, target: str) -> list[tuple]:
    return [(str(row[0]), row[1]) for row in spark.table(quote_table(target)).orderBy("id").collect()]


def chunk(spark, *values: tuple[str, str]) -> SnapshotChunk:
    frame = spark.createDataFrame(list(values), "c0 string, c1 string")
    return SnapshotChunk(COLUMNS, frame, len(values), PROGRESS)


@pytest.mark.parametrize("undecoded", [False, True], ids=["decoded", "undecoded"])
def test_a_chunk_lands_between_the_changes_around_it_without_the_keys_its_window_noted(
        spark, spark_settings, undecoded):
    target = f"lake.snapshot_chunks.between_{'undecoded' if undecoded else 'decoded'}"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    writer = sink.writer
    binlog = BinlogWriter()
    before = [binlog.rows(T, EventType.INSERT, [(None, {"id": D("2.00"), "name": "B"})]),
              binlog.rows(T, EventType.DELETE, [({"id": D("3.00"), "name": "c"}, None)])]
    close = EntryPosition(binlog.journal, binlog.offset)
    binlog.offset += 100
    after = [binlog.rows(T, EventType.UPDATE, [({"id": D("4.00"), "name": "d"}, {"id": D("4.00"), "name": "D2"})])]
    mapper = RowMapper("db.t", None, before_images=writer.before_images())

    def send(entries: list[entry_pb.Entry]) -> None:
        if undecoded:
            mapper.map(entry_pb.RowChange.FromString(entries[0].storeValue), EntryPosition.of(entries[0]))
            writer.send_raw(mapper.raw_batch(row_run(entries)))
        else:
            changed = [row for e in entries
                       for row in mapper.map(entry_pb.RowChange.FromString(e.storeValue), EntryPosition.of(e))]
            writer.send(mapper.batch(changed))

    writer.begin()
    send(before)
    # Read while the stream changed 2 and 3: their rows here are stale. 1 is "1" as a source might print it.
    stale = chunk(spark, ("1", "a"), ("2.00", "b"), ("3.00", "c"), ("4.00", "d"))
    writer.send_chunk(mapper.chunk_batch(stale, ["id"], [("2.00",), ("3",)], close))
    send(after)
    writer.commit(EntryPosition.of(after[-1]), "l1")
    assert rows(spark, target) == [("1.00", "a"), ("2.00", "B"), ("4.00", "D2")]
    assert sink.state.read_state().snapshot == {"db.t": PROGRESS}


def test_the_progress_is_stamped_on_every_later_commit_and_read_back_after_a_restart(spark, spark_settings):
    target = "lake.snapshot_chunks.progress"
    sink = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    writer = sink.writer
    mapper = RowMapper("db.t", None, before_images=writer.before_images())
    assert sink.state.read_state().snapshot == {}
    writer.begin()  # a chunk alone makes the table
    writer.send_chunk(mapper.chunk_batch(chunk(spark, ("1", "a")), ["id"], [], EntryPosition("mysql-bin.000001", 100)))
    writer.commit(EntryPosition("mysql-bin.000001", 100), "l1")
    binlog = BinlogWriter()
    binlog.offset = 200
    entry = binlog.rows(T, EventType.INSERT, [(None, {"id": D("5.00"), "name": "e"})])
    writer.begin()
    writer.send(mapper.batch(mapper.map(entry_pb.RowChange.FromString(entry.storeValue), EntryPosition.of(entry))))
    writer.commit(EntryPosition.of(entry), "l2")
    restarted = make_sink(spark, ChannelSettings("db.t", target), JOB, spark_settings)
    state = restarted.state.read_state()
    assert state.position == EntryPosition.of(entry) and state.snapshot == {"db.t": PROGRESS}
    assert rows(spark, target) == [("1.00", "a"), ("5.00", "e")]


def test_a_chunk_in_a_changelog_is_snapshot_rows_at_its_close_signal_between_the_changes_around_it(
        spark, spark_settings):
    target = "lake.snapshot_chunks.changelog"
    sink = make_sink(spark, ChannelSettings("db.t", target, mode="changelog"), JOB, spark_settings)
    writer = sink.writer
    binlog = BinlogWriter()
    mapper = RowMapper("db.t", None, before_images=writer.before_images())

    def send(entry: entry_pb.Entry) -> None:
        writer.send(mapper.batch(mapper.map(entry_pb.RowChange.FromString(entry.storeValue), EntryPosition.of(entry))))

    writer.begin()
    send(binlog.rows(T, EventType.INSERT, [(None, {"id": D("2.00"), "name": "B"})]))
    send(binlog.rows(T, EventType.DELETE, [({"id": D("3.00"), "name": "c"}, None)]))
    close = EntryPosition(binlog.journal, binlog.offset, 1_700_000_000_000)
    binlog.offset += 100
    writer.send_chunk(mapper.chunk_batch(chunk(spark, ("1", "a"), ("2.00", "b"), ("3.00", "c"), ("4.00", "d")),
                                         ["id"], [("2.00",), ("3",)], close))
    update = binlog.rows(T, EventType.UPDATE, [({"id": D("4.00"), "name": "d"}, {"id": D("4.00"), "name": "D2"})])
    send(update)
    writer.commit(EntryPosition.of(update), "l1")
    held = spark.table(quote_table(target)).orderBy("_seq").collect()
    # Each source change once, in order; the chunk's rows where its close signal stands, but for the keys its
    # window noted (2 and 3), whose changes stand.
    assert [(row["_op"], str(row["id"]), row["name"]) for row in held] == [
        ("+I", "2.00", "B"), ("-D", "3.00", "c"), ("+S", "1.00", "a"), ("+S", "4.00", "d"),
        ("-U", "4.00", "d"), ("+U", "4.00", "D2")]
    snapshot_rows = [row for row in held if row["_op"] == "+S"]
    assert {(row["_journal"], row["_offset"]) for row in snapshot_rows} == {(close.journal, close.offset)}
    assert {row["_execute_time"].timestamp() for row in snapshot_rows} == {1_700_000_000.0}
    assert sink.state.read_state().snapshot == {"db.t": PROGRESS}


def test_a_commit_with_chunks_bounds_its_delete_by_the_key_ranges_of_the_chunks_and_of_the_stream(spark):
    # Iceberg skips the data files a bound excludes: a chunk into keys the target lacks reads none of it.
    changes = spark.createDataFrame([(7, True), (3, True), (900, False), (950, False)],
                                    "`order.id` bigint, _chunk boolean")
    assert _key_bound(changes, "order.id") == (
        "(`order.id` BETWEEN 3 AND 7 OR `order.id` BETWEEN 900 AND 950)")
    unsigned = spark.createDataFrame([(D(18446744073709551615), True)], "k decimal(20,0), _chunk boolean")
    assert _key_bound(unsigned, "k") == "(`k` BETWEEN 18446744073709551615BD AND 18446744073709551615BD)"
    for kind in ("string", "decimal(6,2)", "date"):  # no literal of these: the delete scans as before
        assert _key_bound(spark.createDataFrame([], f"k {kind}, _chunk boolean"), "k") == ""


@pytest.mark.parametrize("mode", ["upsert", "changelog"])
def test_an_empty_chunk_alone_stamps_its_progress_as_a_cancels_mark_does(spark, spark_settings, mode):
    target = f"lake.snapshot_chunks.empty_{mode}"
    sink = make_sink(spark, ChannelSettings("db.t", target, mode=mode), JOB, spark_settings)
    mapper = RowMapper("db.t", None, before_images=sink.writer.before_images())
    finished = TableProgress("snap-1", "db.t", ("9.00",), ("9.00",))
    empty = SnapshotChunk(COLUMNS, spark.createDataFrame([], "c0 string, c1 string"), 0, finished)
    for offset, chunk_ in ((100, chunk(spark, ("1", "a"))), (200, empty)):
        sink.writer.begin()
        sink.writer.send_chunk(mapper.chunk_batch(chunk_, ["id"], [], EntryPosition("mysql-bin.000001", offset)))
        sink.writer.commit(EntryPosition("mysql-bin.000001", offset), f"l{offset}")
    state = make_sink(spark, ChannelSettings("db.t", target, mode=mode), JOB, spark_settings).state.read_state()
    assert state.position == EntryPosition("mysql-bin.000001", 200) and state.snapshot == {"db.t": finished}
    assert spark.table(quote_table(target)).count() == 1


N = TableDef("db", "n", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(8)")))
N_COLUMNS = (SourceColumn("id", "int(11)", 4, True), SourceColumn("name", "varchar(8)", 12, False))


def test_a_chunk_that_read_its_span_whole_removes_the_rows_the_source_lacks_but_not_those_its_window_noted(
        spark, spark_settings):
    target = "lake.snapshot_chunks.stale"
    sink = make_sink(spark, ChannelSettings("db.n", target), JOB, spark_settings)
    writer = sink.writer
    mapper = RowMapper("db.n", None, before_images=writer.before_images())
    binlog = BinlogWriter()

    def land(after: int | None, through: int, values: list[tuple[str, str]], noted: list[tuple[str]],
             where: str | None = None, then: tuple[dict, dict] | None = None) -> dict[int, str]:
        frame = spark.createDataFrame(values, "c0 string, c1 string")
        progress = TableProgress("snap-2", "db.n", (8,), (through,), key=("id",), where=where)
        span = KeyRange(None if after is None else (after,), (through,))
        binlog.offset += 100
        close = EntryPosition(binlog.journal, binlog.offset)
        writer.begin()
        writer.send_chunk(mapper.chunk_batch(SnapshotChunk(N_COLUMNS, frame, len(values), progress, span), ["id"],
                                             noted, close))
        end = close
        if then is not None:  # an UPDATE the stream routed after the chunk's close signal, in its transaction
            binlog.offset += 100
            update = binlog.rows(N, EventType.UPDATE, [then])
            end = EntryPosition.of(update)
            writer.send(mapper.batch(mapper.map(entry_pb.RowChange.FromString(update.storeValue), end)))
        writer.commit(end, f"l{binlog.offset}")
        return {row.id: row.name for row in spark.table(quote_table(target)).collect()}

    assert land(None, 8, [(str(key), "old") for key in range(1, 9)], []) == dict.fromkeys(range(1, 9), "old")
    # A re-sync's chunk of keys 2 to 6: the source lacks 3 and 5 (deleted behind the job's back); the stream
    # changed 4 while the chunk was read (its change stands, landed or to come). 1, 7 and 8 are outside it.
    assert land(1, 6, [("2", "new"), ("6", "new")], [("4",)]) == {1: "old", 2: "new", 4: "old", 6: "new",
                                                                  7: "old", 8: "old"}
    # Keys 7 and 8 with a change in the same transaction, after the close signal: the source lacks 8.
    streamed = ({"id": 7, "name": "chunk"}, {"id": 7, "name": "streamed"})
    assert land(6, 8, [("7", "chunk")], [], then=streamed) == {1: "old", 2: "new", 4: "old", 6: "new", 7: "streamed"}
    # A back-fill's chunk (a filter) took only some rows of its span: it removes none.
    assert land(None, 8, [("1", "fill")], [], where="id = 1") == {1: "fill", 2: "new", 4: "old", 6: "new",
                                                                  7: "streamed"}
    # A re-sync's chunk of every key while the stream changed 2 to 4 (one run), 6, and 99 (past the chunk): the
    # rows of the keys it noted stay, 7 (which the source lacks) goes.
    assert land(None, 8, [("1", "again")], [("2",), ("3",), ("4",), ("6",), ("99",)]) == {
        1: "again", 2: "new", 4: "old", 6: "new"}
