"""``canalbridge status``: the same document live (control endpoint) and offline (state store).

The JSON form is stable (documented in docs/reference/status-json.md): a top-level
object ``{"live": bool, "jobs": [...]}``; each job has ``name``, ``state``,
``channels`` (``source``, ``target``, ``committed_position``, ``layout_note``:
null, or why the target's layout makes commits slow, live only;
``maintenance``: null, or the last maintenance run, live only),
``ack_position``, ``ack_time_ms``, ``delay_ms``, ``execute_time``,
``last_commit_time_ms``, ``position_info``, ``fail_message`` (``kind``,
``text``) or null, ``start_retry`` (``attempts``, ``next_try``: a job paused by
an outage, live only) or null, ``stuck`` (threads of a stopped run still busy: a
commit hanging in the target), the four timestamps, ``recorded_time_ms``
(when the state was last recorded), and ``config`` with
the password masked. A position is ``{"journal", "offset", "gtid",
"execute_time_ms"}``, a Kafka source's with ``lane`` and ``kafka`` (every
partition's mark). A Kafka job adds ``source_transactions`` and, live,
``partitions`` (offsets, lag, last committed entry). Live, ``cut`` is the newest consistent
cut the job's log holds (``seq``, ``tag``, ``label``, ``position``, ``snapshots``: each target's snapshot id
at the cut, ``published_ms``, ``log_table``) or null, and ``cut_error`` why the last cut was not logged.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from canalbridge.sync.model.clock import utc_text
from canalbridge.sync.model.position import Position
from canalbridge.sync.model.record import JobRecord
from canalbridge.sync.model.tracking import format_position_info
from canalbridge.sync.settings import JobSettings

MASK = "******"


def position_json(position: Position | None) -> dict[str, Any] | None:
    return None if position is None else dict(position.to_dict())


def source_json(settings: JobSettings) -> dict[str, Any]:
    """The job's source as configured (``canal`` or ``kafka``), secrets masked."""
    return {settings.source.KIND: settings.source.public(MASK)}


def source_transactions(settings: JobSettings) -> str:
    """Whether commits keep source (MySQL) transactions whole, and why, in one line."""
    return settings.source.transactions()


def job_config_json(settings: JobSettings) -> dict[str, Any]:
    return {
        **source_json(settings),
        "commit": {k: getattr(settings.commit, k) for k in (
            "interval_seconds", "min_events", "min_bytes", "max_bytes", "max_source_txn_wait_seconds",
            "store_capacity", "retries")},
        "maintenance": dataclasses.asdict(settings.maintenance),
        "channels": [{"source": c.source, "target": c.target, "mode": c.mode, "pattern": c.pattern is not None,
                      "columns": list(c.columns) if c.columns else None, "key": list(c.key) if c.key else None,
                      "schema_column": c.schema_column, "table_column": c.table_column,
                      "source_in_key": c.source_in_key}
                     for c in settings.channels],
    }


def job_json(record: JobRecord, settings: JobSettings | None) -> dict[str, Any]:
    """One job's status, from a running job's record or the state store's."""
    ack = record.ack.position if record.ack else None
    ack_time = record.ack.time_ms if record.ack else None
    return {
        "name": record.name,
        "state": record.state.value,
        "channels": [{"source": c.source, "target": c.target, "committed_position": position_json(c.committed),
                      "layout_note": c.layout_note, "maintenance": c.maintenance, "rule": c.rule,
                      "snapshot": None if c.snapshot is None else dataclasses.asdict(c.snapshot),
                      "verify": None if c.verify is None else dataclasses.asdict(c.verify)}
                     for c in sorted(record.channels, key=lambda c: c.source)],
        "ack_position": position_json(ack),
        "ack_time_ms": ack_time,
        "execute_time": utc_text(ack.execute_time_ms) if ack else None,
        "delay_ms": max(ack_time - ack.execute_time_ms, 0) if ack and ack_time else None,
        "last_commit_time_ms": record.last_commit_time_ms,
        "position_info": format_position_info(ack, ack_time),
        "fail_message": {"kind": record.fail.kind.value, "text": record.fail.text} if record.fail else None,
        "stuck": list(record.stuck),
        "start_retry": None if record.start_retry is None else {
            "attempts": record.start_retry.attempts, "next_try": utc_text(record.start_retry.next_try_ms)},
        "cut": None if record.cut is None else record.cut.to_dict(),
        "cut_error": record.cut_error,
        "source_transactions": source_transactions(settings) if settings else None,
        "partitions": [{"partition": p.partition, "committed_offset": p.committed_offset,
                        "end_offset": p.end_offset, "lag": p.lag, "binlog_position": p.binlog_position,
                        "execute_time": utc_text(p.execute_time_ms) if p.execute_time_ms else None,
                        "copies_dropped": p.copies_dropped}
                       for p in record.partitions],
        "create_time_ms": record.create_time_ms,
        "last_start_time_ms": record.last_start_time_ms,
        "last_stop_time_ms": record.last_stop_time_ms,
        "finish_time_ms": record.finish_time_ms,
        "recorded_time_ms": record.updated_ms,
        "config": job_config_json(settings) if settings else None,
    }


def render_text(document: dict[str, Any], config_path: str | None = None) -> str:
    """The human form of a status document (``config_path``: the config's, for the commands it prints)."""
    live = document["live"]
    lines = [f"daemon: {'running' if live else 'not running (what it last recorded in its state store)'}"]
    for job in document["jobs"]:
        lines.append(f"job {job['name']}: {job['state']}{'' if live else _as_of(job.get('recorded_time_ms'))}")
        lines.append(f"  {job['position_info']}")
        if job["last_commit_time_ms"]:
            lines.append(f"  last commit: {utc_text(job['last_commit_time_ms'])}")
        if job["fail_message"]:
            lines.append(f"  reason: {job['fail_message']['kind']}: {job['fail_message']['text']}")
        if job.get("start_retry"):
            retry = job["start_retry"]
            lines.append(f"  starts again at {retry['next_try']} (failed starts in a row: {retry['attempts']}); "
                         f"`pause` stops the retries")
        if job.get("stuck"):
            lines.append(f"  stuck (a commit hangs in the target): {', '.join(job['stuck'])}")
        if job.get("source_transactions"):
            lines.append(f"  source transactions: {job['source_transactions']}")
        if job.get("cut"):
            cut = job["cut"]
            lines.append(f"  consistent cut: {cut['tag']} at {cut['position']}, {len(cut['snapshots'])} targets, "
                         f"logged {utc_text(cut['published_ms'])} (`canalbridge cuts {job['name']}`)")
        if job.get("cut_error"):
            lines.append(f"  last cut not logged: {job['cut_error']}")
        for partition in job.get("partitions") or ():
            lines.append(f"  partition {partition['partition']}: committed offset {partition['committed_offset']}, "
                         f"end {partition['end_offset']}, lag {partition['lag']} messages"
                         + (f", last {partition['binlog_position']}" if partition["binlog_position"] else "")
                         + (f" executed {partition['execute_time']}" if partition["execute_time"] else ""))
        rules = {c["source"]: c["target"] for c in (job["config"] or {}).get("channels", ()) if c.get("pattern")}
        made: dict[str, list[dict[str, Any]]] = {rule: [] for rule in rules}
        for channel in job["channels"]:
            if channel.get("rule"):
                made.setdefault(channel["rule"], []).append(channel)
            else:
                lines.extend(_channel_lines(job["name"], channel, "  ", config_path))
        for rule, channels in made.items():
            into = f" -> {rules[rule]}" if rule in rules else ""
            lines.append(f"  pattern {rule}{into}: {len(channels)} table{'' if len(channels) == 1 else 's'} so far")
            for channel in channels:
                lines.extend(_channel_lines(job["name"], channel, "    ", config_path))
        config = job["config"]
        if config and "canal" in config:
            canal = config["canal"]
            lines.append(f"  canal {canal['host']}:{canal['port']} destination {canal['destination']} "
                         f"user {canal['username'] or '-'} password {canal['password'] or '-'}")
        elif config and "kafka" in config:
            kafka = config["kafka"]
            lines.append(f"  kafka {','.join(kafka['bootstrap_servers'])} topic {kafka['topic']} group "
                         f"{kafka['group_id']} format {kafka['format']}")
    return "\n".join(lines)


def _as_of(recorded_ms: int | None) -> str:
    """When a state read from the store was recorded: the daemon may have died since, so it is not "now"."""
    if recorded_ms is None:
        return " (never run from this state directory)"
    return f" (as of {utc_text(recorded_ms)}, daemon not running)"


def _channel_lines(job: str, channel: dict[str, Any], indent: str, config_path: str | None) -> list[str]:
    committed = channel["committed_position"]
    where = _where(committed) if committed else "nothing committed"
    lines = [f"{indent}{channel['source']} -> {channel['target']}  ({where})"]
    if channel.get("layout_note"):
        lines.append(f"{indent}  slow commits: {channel['layout_note']}")
    if channel.get("maintenance"):
        lines.append(f"{indent}  last maintenance: {channel['maintenance']}")
    if channel.get("snapshot"):
        lines.append(f"{indent}  snapshot: {snapshot_line(channel['snapshot'])}")
    if channel.get("verify"):
        verified = verify_lines(job, channel["source"], channel["verify"], config_path)
        lines.extend(f"{indent}  {line}" for line in verified)
    return lines


def verify_lines(job: str, table: str, check: dict[str, Any], config_path: str | None = None) -> list[str]:
    """The last verify of ``job``'s ``table`` (the status document's ``verify`` of a channel): a line, and for
    each chunk that differs, its keys and the command that repairs it (``config_path``: the config it names)."""
    if check["phase"] == "waiting":
        return ["verify: waiting for the tables before it"]
    line = f"verify: {check['phase']}, {check['chunks']} chunks, {check['rows']} rows compared"
    if check["error"]:
        line += f": {check['error']}"
    lines = [line]
    for difference in check["differences"]:
        sample = ", ".join(f"({key})" for key in difference["sample"])
        more = "" if len(difference["sample"]) >= difference["keys"] else ", ..."
        count = difference["keys"]
        lines.append(f"  {_keys(difference['after'], difference['through'])}: "
                     f"{count} {'key differs' if count == 1 else 'keys differ'}: {sample}{more}")
        path = f" -c {shlex.quote(config_path)}" if config_path is not None else ""
        lines.append(f"    repair: canalbridge snapshot{path} {shlex.quote(job)} {shlex.quote(table)} "
                     f"--where {shlex.quote(difference['where'])}")
    return lines


def snapshot_line(snapshot: dict[str, Any]) -> str:
    """A table's snapshot (the status document's ``snapshot`` of a channel) in one line."""
    if snapshot["phase"] == "waiting":
        return "waiting for the tables before it"
    if snapshot["phase"] == "parked":  # (its error says why, and what to do)
        return f"parked: {snapshot.get('error')}"
    line = f"{snapshot['phase']}, {snapshot['chunks']} chunks, {snapshot['rows']} rows in this run"
    if snapshot["rows_per_second"] is not None:
        line += f" ({snapshot['rows_per_second']:g} rows/s)"
    # (.get: a status document of a daemon older than these fields)
    estimate, left = snapshot.get("rows_estimate"), snapshot.get("seconds_left")
    if estimate is not None:
        line += f", {snapshot.get('rows_done', 0)} of about {estimate} rows"
    if left is not None:
        line += f", about {_duration(left)} left"
    if snapshot["last"] is not None:
        line += f", through key ({snapshot['done'] or 'none yet'}) of ({snapshot['last']})"
    return line


def _keys(after: str | None, through: str | None) -> str:
    """A chunk's keys: after ``after`` (None: from the first) through ``through`` (None: all above)."""
    if after is None:
        return "every key" if through is None else f"keys through ({through})"
    return f"keys after ({after})" + ("" if through is None else f" through ({through})")


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads a time left: 45 s, 12 min, 3.5 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _where(position: dict[str, Any]) -> str:
    """A committed position in one line: a binlog position, or each Kafka partition's resume offset."""
    lanes = position.get("kafka")
    if lanes:
        return ", ".join(f"{lane} from offset {mark[3]}" for lane, mark in sorted(lanes.items()))
    return f"{position['journal']}:{position['offset']}"

