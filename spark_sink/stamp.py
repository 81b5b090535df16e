"""The stamp a job's commit leaves in its snapshot's summary, and reading it back.

Each commit carries the channel's end position, its label, where a refill
behind the table's position really reached, and the snapshot's progress.
A channel reads the newest stamp of its job in main's lineage at start
(:func:`read_stamp`); a reset makes it read none up to where main stood.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from canalbridge.sync.model.position import Position, position_from_dict
from canalbridge.sync.snapshot.progress import TableProgress, progress_from_json, progress_to_json
from spark_sink.identifiers import sql_string
from spark_sink.table import TargetTable

# Snapshot-summary keys that carry a channel's position.
PROP_JOB = "canalbridge.job"
PROP_LABEL = "canalbridge.label"
# A commit behind the table's position (it filled in what Canal's first pass missed): where it really
# reached, the position's to_dict() as JSON (see canalbridge.sync.model.position.Refill).
PROP_BEHIND = "canalbridge.refill-behind"
# How far the snapshot of each source table came (canalbridge.sync.snapshot.progress), once one began: every
# later commit of the job stamps it again, so the newest stamp always holds it.
PROP_SNAPSHOT = "canalbridge.snapshot"
# Snapshot-summary keys of the positions' to_dict() fields (names kept from the first release);
# a Kafka source's positions add the lane and every lane's mark (JSON).
POSITION_KEYS = {
    "journal": "canalbridge.journal",
    "offset": "canalbridge.offset",
    "gtid": "canalbridge.gtid",
    "execute_time_ms": "canalbridge.execute-time",
    "lane": "canalbridge.kafka-lane",
    "kafka": "canalbridge.kafka-offsets",
}
# Per job (the key ends with the job's name): the snapshot main stood at when `canalbridge reset` made the
# job forget the table's position; positions in that snapshot and its ancestors are not read.
PROP_POSITION_RESET = "canalbridge.position-reset."
# Per job (the key ends with the job's name): `canalbridge rebuild` marked the table to be made anew. Set with
# a position reset; while no stamp of the job is read back, the job's first apply replaces the table.
PROP_REBUILD = "canalbridge.rebuild."


def position_properties(job: str, label: str, position: Position, behind: Position | None = None,
                        snapshot: Mapping[str, TableProgress] | None = None) -> dict[str, str]:
    properties = {PROP_JOB: job, PROP_LABEL: label}
    properties.update({POSITION_KEYS[field]: value if isinstance(value, str) else json.dumps(value)
                       for field, value in position.to_dict().items()})
    if behind is not None:
        properties[PROP_BEHIND] = json.dumps(behind.to_dict(), sort_keys=True)
    if snapshot:
        properties[PROP_SNAPSHOT] = progress_to_json(snapshot)
    return properties


def position_from_summary(summary: dict[str, str]) -> Position:
    return position_from_dict({field: summary.get(key) for field, key in POSITION_KEYS.items()})


@dataclass(frozen=True)
class Stamp:
    """What a job's commit stored with its snapshot."""

    position: Position
    label: str | None
    refill: Position | None  # where a commit behind the table's position really reached (see position.Refill)
    committed_ms: int  # when the snapshot was committed
    snapshot: dict[str, TableProgress] = field(default_factory=dict)  # of each source table whose snapshot began


def read_stamp(table: TargetTable, job: str, properties: Mapping[str, str] | None = None) -> Stamp | None:
    """The stamp of the newest snapshot ``job`` committed among main's current snapshot and its
    ancestors; None when the table has no snapshot or that lineage has none of this job's.
    ``properties``: the table's, if the caller read them already."""
    found = _position_snapshot(table, job, properties)
    if found is None:
        return None
    committed_ms, summary = found
    behind = summary.get(PROP_BEHIND)
    return Stamp(position_from_summary(summary), summary.get(PROP_LABEL),
                 None if behind is None else position_from_dict(json.loads(behind)), committed_ms,
                 progress_from_json(summary.get(PROP_SNAPSHOT)))


def _position_snapshot(table: TargetTable, job: str, properties: Mapping[str, str] | None = None,
                       ) -> tuple[int, dict[str, str]] | None:
    """(commit time in ms, summary) of the newest snapshot of ``job`` in main's lineage."""
    # The parent chain, not the newest snapshot by commit time: after rollback_to_snapshot, or
    # with commits on another branch, that snapshot may hold data the table does not (Iceberg's
    # Flink sink finds its last checkpoint the same way). Not history.is_current_ancestor either:
    # history lists only snapshots made current on main, so it misses the ancestors that main
    # gained by a fast-forward or set_current_snapshot to a branch.
    # main first: a commit between the two reads only adds a descendant of it.
    main = f"SELECT snapshot_id FROM {table.identifier}.refs WHERE name = 'main'"
    current = table.spark.sql(main).collect()
    if not current:
        return None
    # One query for the whole graph; only this job's summaries come back, the rest are NULL.
    rows = table.spark.sql(
        f"SELECT snapshot_id, parent_id, unix_millis(committed_at) AS committed_ms, "
        f"IF(summary[{sql_string(PROP_JOB)}] = :job, summary, NULL) AS summary "
        f"FROM {table.identifier}.snapshots",
        args={"job": job},
    ).collect()
    reset = (table.properties() if properties is None else properties).get(PROP_POSITION_RESET + job)
    forgotten = int(reset) if reset else None
    parents = {row["snapshot_id"]: row["parent_id"] for row in rows}
    found = {row["snapshot_id"]: (row["committed_ms"], row["summary"]) for row in rows
             if row["summary"] is not None}
    snapshot_id = current[0]["snapshot_id"]
    for _ in range(len(parents)):  # bounded: a malformed parent cycle must not hang the job
        if snapshot_id is None or snapshot_id not in parents or snapshot_id == forgotten:
            break  # the first snapshot, an ancestor expired, or where a reset left the table
        if snapshot_id in found:
            return found[snapshot_id]
        snapshot_id = parents[snapshot_id]
    return None


def forget_position(table: TargetTable, job: str, *, rebuild: bool = False) -> None:
    """Make :func:`read_stamp` read none of ``job``'s positions up to main's current snapshot; with ``rebuild``,
    mark the table to be made anew by the job too (:func:`rebuild_marked`), in the same metadata commit. A plain
    reset clears such a mark."""
    current = table.spark.sql(f"SELECT snapshot_id FROM {table.identifier}.refs WHERE name = 'main'").collect()
    properties = {PROP_POSITION_RESET + job: str(current[0]["snapshot_id"])} if current else {}
    if rebuild:
        properties[PROP_REBUILD + job] = properties.get(PROP_POSITION_RESET + job, "empty")
    elif PROP_REBUILD + job in table.properties():
        clear_rebuild(table, job)
    if properties:
        rendered = ", ".join(f"{sql_string(key)}={sql_string(value)}" for key, value in properties.items())
        table.spark.sql(f"ALTER TABLE {table.identifier} SET TBLPROPERTIES ({rendered})")


def rebuild_marked(properties: Mapping[str, str], job: str) -> bool:
    """Whether the table's ``properties`` hold ``job``'s rebuild mark (:func:`forget_position`)."""
    return PROP_REBUILD + job in properties


def rebuild_properties(job: str) -> dict[str, str]:
    """The properties a table made anew for ``job``'s rebuild keeps until the job's first commit in it lands."""
    return {PROP_REBUILD + job: "replaced"}


def clear_rebuild(table: TargetTable, job: str) -> None:
    """Drop ``job``'s rebuild mark: a commit of the job landed in the table made anew."""
    table.spark.sql(f"ALTER TABLE {table.identifier} UNSET TBLPROPERTIES IF EXISTS "
                    f"({sql_string(PROP_REBUILD + job)})")
