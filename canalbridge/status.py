"""``canalbridge status``: the same document live (control endpoint) and offline (state store).

The JSON form is stable (documented in README, "Status"): a top-level
object ``{"live": bool, "jobs": [...]}``; each job has ``name``, ``state``,
``channels`` (``source``, ``target``, ``committed_position``),
``ack_position``, ``ack_time_ms``, ``delay_ms``, ``execute_time``,
``last_commit_time_ms``, ``position_info``, ``fail_message`` (``kind``,
``text``) or null, the four timestamps, and ``config`` with the password
masked. A position is ``{"journal", "offset", "gtid", "execute_time_ms"}``.
"""

from __future__ import annotations

import time
from typing import Any

from canalbridge.sync.position import EntryPosition, format_position_info
from canalbridge.sync.settings import JobSettings

MASK = "******"


def position_json(position: EntryPosition | None) -> dict[str, Any] | None:
    return None if position is None else dict(position.to_dict())


def job_config_json(settings: JobSettings) -> dict[str, Any]:
    canal = settings.canal
    return {
        "canal": {"host": canal.host, "port": canal.port, "destination": canal.destination,
                  "username": canal.username, "password": MASK if canal.password else "",
                  "client_id": canal.client_id, "batch_size": canal.batch_size, "debug": canal.debug},
        "commit": {k: getattr(settings.commit, k) for k in (
            "interval_seconds", "min_events", "min_bytes", "max_bytes", "max_source_txn_wait_seconds",
            "store_capacity", "retries")},
        "channels": [{"source": c.source, "target": c.target, "mode": c.mode,
                      "columns": list(c.columns) if c.columns else None, "key": list(c.key) if c.key else None}
                     for c in settings.channels],
    }


def job_json(snapshot: dict[str, Any], settings: JobSettings | None) -> dict[str, Any]:
    """One job's status from a snapshot (``SyncJob.snapshot()`` or a state-store record)."""
    ack: EntryPosition | None = snapshot.get("ack_position")
    ack_time = snapshot.get("ack_time_ms")
    fail = {"kind": snapshot["fail_kind"], "text": snapshot["fail_text"]} if snapshot.get("fail_kind") else None
    return {
        "name": snapshot["name"],
        "state": snapshot["state"],
        "channels": [{"source": source, "target": target, "committed_position": position_json(position)}
                     for source, (target, position) in sorted(snapshot.get("channels", {}).items())],
        "ack_position": position_json(ack),
        "ack_time_ms": ack_time,
        "execute_time": _iso(ack.execute_time_ms) if ack else None,
        "delay_ms": max(ack_time - ack.execute_time_ms, 0) if ack and ack_time else None,
        "last_commit_time_ms": snapshot.get("last_commit_time_ms"),
        "position_info": format_position_info(ack, ack_time),
        "fail_message": fail,
        "create_time_ms": snapshot.get("create_time_ms"),
        "last_start_time_ms": snapshot.get("last_start_time_ms"),
        "last_stop_time_ms": snapshot.get("last_stop_time_ms"),
        "finish_time_ms": snapshot.get("finish_time_ms"),
        "config": job_config_json(settings) if settings else None,
    }


def render_text(document: dict[str, Any]) -> str:
    """The human form of a status document."""
    lines = [f"daemon: {'running' if document['live'] else 'not running (state from the state store)'}"]
    for job in document["jobs"]:
        lines.append(f"job {job['name']}: {job['state']}")
        lines.append(f"  {job['position_info']}")
        if job["last_commit_time_ms"]:
            lines.append(f"  last commit: {_iso(job['last_commit_time_ms'])}")
        if job["fail_message"]:
            lines.append(f"  reason: {job['fail_message']['kind']}: {job['fail_message']['text']}")
        for channel in job["channels"]:
            committed = channel["committed_position"]
            where = f"{committed['journal']}:{committed['offset']}" if committed else "nothing committed"
            lines.append(f"  {channel['source']} -> {channel['target']}  ({where})")
        if job["config"]:
            canal = job["config"]["canal"]
            lines.append(f"  canal {canal['host']}:{canal['port']} destination {canal['destination']} "
                         f"user {canal['username'] or '-'} password {canal['password'] or '-'}")
    return "\n".join(lines)


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
