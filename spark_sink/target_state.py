"""What an Iceberg target holds for a job, read back in one go: columns, last stamp, aliases, source name."""

from __future__ import annotations

import json

from canalbridge.sync.channel.sink import TargetState
from canalbridge.sync.errors import SyncError
from canalbridge.sync.model.position import Position
from spark_sink.errors import TargetReadError
from spark_sink.stamp import clear_rebuild, forget_position, read_stamp, rebuild_marked
from spark_sink.table import PROP_COLUMN_ALIASES, PROP_SOURCE_TABLE
from spark_sink.writer import IcebergWriter


class IcebergTargetReader:
    """Reads the state of the table a channel's writer holds (a :class:`~canalbridge.sync.channel.sink.TargetReader`).

    The position comes from the newest snapshot of the job in main's lineage
    (:func:`~spark_sink.stamp.read_stamp`); aliases and the followed
    table's name from the table's properties, which the schema applier sets.
    A table marked for a rebuild reads as one to create until a commit of
    the job lands in it.
    """

    def __init__(self, writer: IcebergWriter) -> None:
        self._writer = writer

    def read_state(self) -> TargetState:
        try:
            return self._read_state()
        except SyncError:
            raise
        except Exception as exc:  # the catalog or the store: Spark's words, shortened, with the target's name
            raise TargetReadError(self._writer.channel.target, exc) from exc

    def _read_state(self) -> TargetState:
        writer = self._writer
        table = writer.live()
        columns = table.columns()
        if columns is None:
            writer.resume_snapshot({})
            return TargetState()
        own = set(writer.mode.own_columns())
        properties = table.properties()
        writer.shaping.learn(properties)  # (the excluded columns DDLs renamed: the rows map them too)
        stamp = read_stamp(table, writer.job, properties)  # (one read of the properties for both)
        marked = rebuild_marked(properties, writer.job)
        writer.rebuild_pending = marked and stamp is None
        if writer.rebuild_pending:
            writer.resume_snapshot({})
            return TargetState(rebuild=True)
        if marked:  # (a commit landed in the table made anew before its mark was dropped)
            clear_rebuild(table, writer.job)
        return TargetState(
            writer.shaping.row_columns([c for c in columns if c not in own]),
            None if stamp is None else stamp.position,
            None if stamp is None else stamp.label,
            None if stamp is None else stamp.refill,
            json.loads(properties.get(PROP_COLUMN_ALIASES, "{}")),
            properties.get(PROP_SOURCE_TABLE),
            writer.resume_snapshot({} if stamp is None else stamp.snapshot),
        )

    def changes_held(self, after: Position, through: Position) -> set[tuple[str, int]]:
        return self._writer.mode.changes_held(after, through)

    def forget_position(self) -> None:
        table = self._writer.live()
        if table.columns() is not None:
            forget_position(table, self._writer.job)

    def mark_rebuild(self) -> bool:
        table = self._writer.live()
        if table.columns() is None:
            return False
        forget_position(table, self._writer.job, rebuild=True)
        return True
