"""A channel's commit in steps, driven directly (an in-memory writer, no server)."""

from __future__ import annotations

import threading

from canalbridge.devkit.entries import BinlogWriter, ColumnDef, TableDef
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
from canalbridge.sync.channel.channel import Channel
from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.model.changes import ChangeKind, ChangeRow, RowBatch, SourceColumn
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import ChannelSettings
from tests.infra.memory_writer import InMemoryWriter

EventType = entry_pb.EventType
TABLE = TableDef("db", "t", (ColumnDef.of("id", "int(11)", is_key=True), ColumnDef.of("name", "varchar(8)")))


def test_a_commit_behind_the_tables_position_labels_and_marks_the_rows_it_wrote():
    # A refill commit behind the table's position: its rows, then a DDL the table went through already
    # (skipped, nothing written). The rows step must carry the commit's label: a read-back after a lost
    # reply tells the commit landed by it.
    binlog = BinlogWriter()
    binlog.open()
    rows = binlog.rows(TABLE, EventType.INSERT, [(None, {"id": 2, "name": "b"})])
    binlog.end()
    ddl = binlog.ddl("db", "t", EventType.ALTER, "ALTER TABLE t ADD qty INT")
    held = EntryPosition("mysql-bin.000001", 1_000_000)  # where the table stands: past the DDL
    writer = InMemoryWriter("db.t")
    writer.begin()
    writer.send(RowBatch("db.t", ("id", "name"), (SourceColumn("id", "int(11)", 4, True),
                                                  SourceColumn("name", "varchar(8)", 12, False)), (0,),
                         (ChangeRow(ChangeKind.INSERT, ("1", "a"), held),)))
    writer.commit(held, "earlier")
    stop = threading.Event()
    channel = Channel("job", ChannelSettings("db.t", "lake.t"), ChannelSink.of(writer), stop, 10.0)
    channel.start()
    try:
        channel.begin("refill")
        channel.add(EntryPosition.of(rows), rows.storeValue, table=("db", "t"))
        channel.add(EntryPosition.of(ddl), ddl.storeValue, table=("db", "t"), dml=False)
        assert channel.commit(EntryPosition.of(ddl)).result(10)
    finally:
        stop.set()
        assert channel.join(10)
    assert writer.alterations == []  # applied before
    state = writer.read_state()
    assert (state.position, state.label) == (held, "refill")
    # Stamped with what the table held, and with where the commit really reached: a restart goes on from there.
    assert writer.read_state().refill == EntryPosition.of(rows)
    assert writer.rows.keys() == {("1",), ("2",)}
