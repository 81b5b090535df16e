"""The TOML configuration: load, validate, and turn into settings.

Every problem is reported with the file and the key path
(``job[0].canal.port``), all of them at once, and nothing starts: the
``canalbridge`` commands exit with status 2. Passwords are never echoed.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from canalbridge.canal.server_defaults import BATCH_MODES
from canalbridge.sync.settings import (
    MB,
    CanalSettings,
    ChannelSettings,
    CommitSettings,
    JobSettings,
    KafkaSettings,
    MaintenanceSettings,
    SchemaSettings,
)
from canalbridge.sync.tables import PatternError, TablePattern, TargetTemplate, merges
from spark_sink.settings import SparkSettings


class ConfigError(Exception):
    """The configuration cannot be used; ``problems`` lists each key path and what is wrong."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        listed = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"{path}: invalid configuration:\n{listed}")


@dataclass(frozen=True)
class DaemonSettings:
    """The ``[daemon]`` section."""

    state_dir: Path
    control: str = "127.0.0.1:8765"  # host:port, or a Unix socket path
    control_token: str | None = field(default=None, repr=False)
    log_format: str = "console"
    log_level: str = "info"
    metrics_port: int = 0  # 0: no metrics endpoint


@dataclass(frozen=True)
class Config:
    path: Path
    daemon: DaemonSettings
    spark: SparkSettings
    jobs: tuple[JobSettings, ...]
    warnings: tuple[str, ...] = ()


# -- a small schema walker ---------------------------------------------------------------

Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Key:
    kind: type | tuple[type, ...]
    required: bool = False
    check: Check | None = None


def _port(value: int) -> str | None:
    return None if 1 <= value <= 65535 else f"port {value} is outside 1..65535"


def _port_or_zero(value: int) -> str | None:
    return None if 0 <= value <= 65535 else f"port {value} is outside 0..65535"


def _positive(value: float) -> str | None:
    return None if value > 0 else f"must be positive, got {value}"


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value}"


def _one_of(*choices: str) -> Check:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"


def _non_empty(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _local_path(value: str) -> str | None:
    if not value.strip():
        return "must not be empty"
    # Python writes the staged files: an address only Spark's file systems know would become a local folder.
    return f"must be a local (or mounted) path, got {value!r}" if "://" in value else None


def _table_name(parts: int) -> Check:
    def check(value: str) -> str | None:
        if len([p for p in value.split(".") if p]) < parts:
            return f"{value!r} must name {'schema.table' if parts == 2 else 'catalog.namespace.table'}"
        return None

    return check


DAEMON_KEYS = {
    "state_dir": Key(str, required=True, check=_non_empty),
    "control": Key(str, check=_non_empty),
    "control_token_env": Key(str, check=_non_empty),
    "log_format": Key(str, check=_one_of("json", "console")),
    "log_level": Key(str, check=_one_of("debug", "info", "warning", "error")),
    "metrics_port": Key(int, check=_port_or_zero),
}
SPARK_KEYS = {
    "master": Key(str, check=_non_empty),
    "app_name": Key(str, check=_non_empty),
    "catalog": Key(str, check=_non_empty),
    "warehouse": Key(str, check=_non_empty),
    "spill_rows": Key(int, check=_positive),
    "spill_dir": Key(str, check=_local_path),
    "decoder": Key(str, check=_one_of("auto", "jvm", "python")),
    "conf": Key(dict),
}
JOB_KEYS = {"name": Key(str, required=True, check=_non_empty), "canal": Key(dict), "kafka": Key(dict),
            "commit": Key(dict), "maintenance": Key(dict), "schema": Key(dict), "channel": Key(list, required=True)}
SCHEMA_KEYS = {"drop_column": Key(str, check=_one_of("keep", "drop")),
               "truncate": Key(str, check=_one_of("ignore", "apply")),
               "rename_table": Key(str, check=_one_of("ignore", "follow"))}
CANAL_KEYS = {
    "host": Key(str, required=True, check=_non_empty),
    "port": Key(int, required=True, check=_port),
    "destination": Key(str, required=True, check=_non_empty),
    "username": Key(str),
    "password": Key(str),
    "password_env": Key(str, check=_non_empty),
    "batch_size": Key(int, check=_positive),
    "client_id": Key(str, check=lambda v: None if v.lstrip("-").isdigit() and -32768 <= int(v) <= 32767
                     else f"must be a number that fits a Java short, got {v!r}"),
    "debug": Key(bool),
    "poll_timeout_ms": Key(int, check=_positive),
    "store_capacity": Key(int, check=lambda v: None if v > 0 and v & (v - 1) == 0
                          else f"must be a power of 2 like canal.instance.memory.buffer.size, got {v}"),
    "transaction_size": Key(int, check=_positive),
    "batch_mode": Key(str, check=lambda v: None if v in BATCH_MODES
                      else f"must be one of {', '.join(BATCH_MODES)} like canal.instance.memory.batch.mode, got {v!r}"),
}
def _bootstrap(value: str | list) -> str | None:
    servers = value.split(",") if isinstance(value, str) else value
    if not servers or not all(isinstance(s, str) and s.strip().rpartition(":")[2].isdigit() for s in servers):
        return f"must be host:port, or a list of them, got {value!r}"
    return None


KAFKA_KEYS = {
    "bootstrap_servers": Key((str, list), required=True, check=_bootstrap),
    "topic": Key(str, required=True, check=_non_empty),
    "group_id": Key(str, check=_non_empty),
    "client_id": Key(str, check=_non_empty),
    "format": Key(str, check=_one_of("flat", "protobuf")),
    "transaction_markers": Key(bool),
    "start_from": Key(str, check=_one_of("earliest", "latest")),
    "poll_timeout_ms": Key(int, check=_positive),
    "max_poll_records": Key(int, check=_positive),
    "request_timeout_ms": Key(int, check=_positive),
    "debug": Key(bool),
    "security": Key(dict),
}
# kafka-python's consumer settings a job may pass (its names); *_password may come from *_password_env.
KAFKA_SECURITY_KEYS = {
    "security_protocol": Key(str, check=_one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    "sasl_mechanism": Key(str, check=_one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")),
    "sasl_plain_username": Key(str),
    "sasl_plain_password": Key(str),
    "sasl_plain_password_env": Key(str, check=_non_empty),
    "sasl_kerberos_service_name": Key(str, check=_non_empty),
    "sasl_kerberos_domain_name": Key(str, check=_non_empty),
    "ssl_cafile": Key(str, check=_non_empty),
    "ssl_certfile": Key(str, check=_non_empty),
    "ssl_keyfile": Key(str, check=_non_empty),
    "ssl_password": Key(str),
    "ssl_password_env": Key(str, check=_non_empty),
    "ssl_crlfile": Key(str, check=_non_empty),
    "ssl_check_hostname": Key(bool),
    "ssl_ciphers": Key(str, check=_non_empty),
}
COMMIT_KEYS = {
    "interval_seconds": Key((int, float), check=_positive),
    "min_events": Key(int, check=_not_negative),
    "min_bytes": Key(int, check=_not_negative),
    "max_bytes": Key(int, check=_positive),
    "max_source_txn_wait_seconds": Key((int, float), check=_positive),
    "retries": Key(int, check=_not_negative),
    "retry_initial_seconds": Key((int, float), check=_positive),
    "retry_max_seconds": Key((int, float), check=_positive),
    "reconnect_attempts": Key(int, check=_positive),
    "commit_timeout_seconds": Key((int, float), check=_positive),
    "stop_timeout_seconds": Key((int, float), check=_positive),
    "overlap": Key(bool),
}
MAINTENANCE_KEYS = {
    "enabled": Key(bool),
    "interval_minutes": Key((int, float), check=_positive),
    "keep_snapshots_hours": Key((int, float), check=_not_negative),
    "timeout_seconds": Key((int, float), check=_positive),
}
CHANNEL_KEYS = {
    "source": Key(str, check=_table_name(2)),
    "source_regex": Key(str, check=_non_empty),
    "target": Key(str, required=True, check=_non_empty),  # a template: checked with the source
    "columns": Key(list),
    "key": Key(list),
    "mode": Key(str, check=_one_of("upsert", "changelog")),
    "schema_column": Key(str, check=_non_empty),
    "table_column": Key(str, check=_non_empty),
    "source_in_key": Key(bool),
}


def _walk(table: Any, keys: dict[str, Key], where: str, problems: list[str]) -> dict[str, Any]:
    """Check one TOML table against ``keys``; return the values that passed."""
    if not isinstance(table, dict):
        problems.append(f"{where}: must be a table, got {type(table).__name__}")
        return {}
    values: dict[str, Any] = {}
    for name in table:
        if name not in keys:
            problems.append(f"{where}.{name}: unknown key (known: {', '.join(sorted(keys))})")
    for name, key in keys.items():
        path = f"{where}.{name}"
        if name not in table:
            if key.required:
                problems.append(f"{path}: missing required key")
            continue
        value = table[name]
        kinds = key.kind if isinstance(key.kind, tuple) else (key.kind,)
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            wanted = " or ".join(k.__name__ for k in kinds)
            shown = "<hidden>" if "password" in name else repr(value)
            problems.append(f"{path}: must be {wanted}, got {type(value).__name__} {shown}")
            continue
        reason = key.check(value) if key.check else None
        if reason:
            problems.append(f"{path}: {reason}")
            continue
        values[name] = value
    return values


# -- loading -------------------------------------------------------------------------------

def load_config(path: Path, environ: dict[str, str] | None = None) -> Config:
    """Read and validate ``path``; raise ConfigError listing every problem."""
    environ = dict(os.environ) if environ is None else environ
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(path, ["the file does not exist"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [f"cannot read the file: {exc}"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [f"not valid TOML: {exc}"]) from None

    problems: list[str] = []
    warnings: list[str] = []
    for name in raw:
        if name not in ("daemon", "spark", "job"):
            problems.append(f"{name}: unknown section (known: daemon, spark, job)")
    daemon_values = _walk(raw.get("daemon", {}), DAEMON_KEYS, "daemon", problems)
    if "daemon" not in raw:
        problems.append("daemon: missing required section")
    spark_values = _walk(raw.get("spark", {}), SPARK_KEYS, "spark", problems)
    for conf_key, conf_value in spark_values.get("conf", {}).items():
        if not isinstance(conf_value, (str, int, float, bool)):
            problems.append(f"spark.conf.{conf_key}: must be a string, number or boolean")
    raw_jobs = raw.get("job", [])
    if not isinstance(raw_jobs, list) or not raw_jobs:
        problems.append("job: at least one [[job]] is required")
        raw_jobs = []

    control_token = None
    if "control_token_env" in daemon_values:
        variable = daemon_values["control_token_env"]
        control_token = environ.get(variable)
        if not control_token:
            problems.append(f"daemon.control_token_env: environment variable {variable} is not set")

    jobs = [_job(raw_job, index, environ, problems, warnings) for index, raw_job in enumerate(raw_jobs)]
    _check_across_jobs(jobs, problems)
    if _has_password(raw) and _world_readable(path):
        warnings.append(f"{path} holds a password and is readable by every user: chmod 600 it or use password_env")
    if problems:
        raise ConfigError(path, problems)

    base = path.parent
    state_dir = (base / daemon_values["state_dir"]).resolve()
    # Only the keys given are passed: each default lives in its settings class.
    daemon = DaemonSettings(state_dir=state_dir, control_token=control_token,
                            **_given(daemon_values, "control", "log_format", "log_level", "metrics_port"))
    spark = SparkSettings(
        warehouse=str((base / spark_values.get("warehouse", str(state_dir / "warehouse"))).resolve()),
        conf={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark_values.get("conf", {}).items()},
        spill_dir=str((base / spark_values.get("spill_dir", str(state_dir / "spill"))).resolve()),
        **_given(spark_values, "master", "app_name", "catalog", "spill_rows", "decoder"),
    )
    if not spark.master.startswith("local") and "spill_dir" not in spark_values:
        warnings.append(f"spark.master is {spark.master!r} but spark.spill_dir is not set: every commit's staged "
                        f"files go to {spark.spill_dir}, which every executor must read at the same path")
    return Config(path, daemon, spark, tuple(j for j in jobs if j is not None), tuple(warnings))


def _job(raw: Any, index: int, environ: dict[str, str], problems: list[str], warnings: list[str]) -> JobSettings | None:
    where = f"job[{index}]"
    count = len(problems)
    values = _walk(raw, JOB_KEYS, where, problems)
    canal = _walk(values.get("canal", {}), CANAL_KEYS, f"{where}.canal", problems) if "canal" in values else {}
    kafka = _kafka(values, where, environ, problems) if "kafka" in values else None
    if isinstance(raw, dict) and ("canal" in raw) == ("kafka" in raw):
        problems.append(f"{where}: give it either [job.canal] (Canal's TCP protocol) or [job.kafka] (Canal's "
                        f"Kafka topic), {'not both' if 'canal' in raw else 'none is set'}")
    commit = _walk(values.get("commit", {}), COMMIT_KEYS, f"{where}.commit", problems)
    maintenance = _walk(values.get("maintenance", {}), MAINTENANCE_KEYS, f"{where}.maintenance", problems)
    schema = _walk(values.get("schema", {}), SCHEMA_KEYS, f"{where}.schema", problems)
    channels = []
    for position, raw_channel in enumerate(values.get("channel", [])):
        channel_where = f"{where}.channel[{position}]"
        channel = _walk(raw_channel, CHANNEL_KEYS, channel_where, problems)
        for list_key in ("columns", "key"):
            items = channel.get(list_key)
            if items is not None and (not items or not all(isinstance(i, str) and i for i in items)):
                problems.append(f"{channel_where}.{list_key}: must be a non-empty list of column names")
        given = set(raw_channel) if isinstance(raw_channel, dict) else set()
        _channel_tables(channel, given, channel_where, problems, warnings)
        channels.append(channel)
    if "channel" in values and not values["channel"]:
        problems.append(f"{where}.channel: at least one [[job.channel]] is required")

    password = canal.get("password", "")
    if "password" in canal and "password_env" in canal:
        problems.append(f"{where}.canal: set password or password_env, not both")
    elif "password_env" in canal:
        variable = canal["password_env"]
        if variable not in environ:
            problems.append(f"{where}.canal.password_env: environment variable {variable} is not set")
        password = environ.get(variable, "")

    store = _given(canal, "store_capacity")
    if "batch_mode" in canal:
        store["store_batch_mode"] = canal["batch_mode"]
    if "transaction_size" in canal:
        store["store_transaction_size"] = canal["transaction_size"]
    commit_settings = CommitSettings(**commit, **store)
    store_capacity = commit_settings.store_capacity
    # Not errors: the job still runs, but these minimums can never be reached, so
    # every commit is cut by the store limit or the interval instead.
    if commit_settings.min_events > store_capacity:
        warnings.append(
            f"{where}.commit.min_events: {commit_settings.min_events} events exceed what Canal's store holds "
            f"without an ack ({store_capacity}, canal.instance.memory.buffer.size): commits will be cut by the "
            f"store limit or the interval instead; lower it or raise {where}.canal.store_capacity with Canal's "
            f"setting"
        )
    store_bytes = store_capacity * commit_settings.store_memunit
    if commit_settings.store_batch_mode == "MEMSIZE" and commit_settings.min_bytes > store_bytes:
        warnings.append(
            f"{where}.commit.min_bytes: {commit_settings.min_bytes} bytes exceed Canal's store "
            f"({store_capacity} x memunit {commit_settings.store_memunit} = {store_bytes} bytes in MEMSIZE mode): "
            f"commits will be cut by the store limit or the interval instead"
        )
    if commit_settings.max_bytes < commit_settings.min_bytes:
        problems.append(f"{where}.commit.max_bytes: smaller than min_bytes ({commit_settings.min_bytes})")
    if len(problems) > count:
        return None
    return JobSettings(
        name=values["name"],
        canal=CanalSettings(
            host=canal["host"], port=canal["port"], destination=canal["destination"], password=password,
            **_given(canal, "username", "client_id", "batch_size", "poll_timeout_ms", "debug"),
        ) if kafka is None else None,
        kafka=kafka,
        channels=tuple(
            ChannelSettings(
                source=c["source"], target=c["target"],
                columns=tuple(c["columns"]) if "columns" in c else None,
                key=tuple(c["key"]) if "key" in c else None,
                **_given(c, "mode", "pattern", "schema_column", "table_column", "source_in_key"),
            )
            for c in channels
        ),
        commit=commit_settings,
        maintenance=MaintenanceSettings(**maintenance),
        schema=SchemaSettings(**schema),
    )


def _channel_tables(channel: dict[str, Any], given: set[str], where: str, problems: list[str],
                    warnings: list[str]) -> None:
    """A channel's source (a table, a glob or ``source_regex``) and target (a template): checked, and turned
    into the values :class:`ChannelSettings` takes (``pattern`` for a rule; a named table's target formatted)."""
    if ("source" in given) == ("source_regex" in given):
        problems.append(f"{where}: give it source (schema.table, either part may have * ? [...]) or source_regex, "
                        f"{'not both' if 'source' in channel else 'none is set'}")
        channel.pop("target", None)
        return
    if "source" not in channel and "source_regex" not in channel:
        return  # (its check said why)
    regex = "source_regex" in channel
    try:
        pattern = TablePattern(channel.pop("source_regex") if regex else channel["source"], regex=regex)
    except PatternError as exc:
        problems.append(f"{where}.{'source_regex' if regex else 'source'}: {exc}")
        channel.pop("target", None)
        return
    if "target" not in channel:
        return
    try:
        template = TargetTemplate(channel["target"])
    except PatternError as exc:
        problems.append(f"{where}.target: {exc}")
        channel.pop("target")
        return
    channel["source"] = pattern.text
    if pattern.literal:
        schema, table = pattern.text.split(".")
        channel["target"] = template.format(schema, table)
    else:
        channel["pattern"] = pattern
    if "columns" in channel and ("schema_column" in channel or "table_column" in channel):
        problems.append(f"{where}: an explicit columns list names every target column: list the source's "
                        f"columns alone and drop schema_column/table_column, or drop the list")
    if channel.get("source_in_key") and not ("schema_column" in channel or "table_column" in channel):
        problems.append(f"{where}.source_in_key: the key takes the columns that record the source: set "
                        f"table_column (and schema_column if the shards' schemas differ)")
    if merges(pattern, template) and channel.get("mode", "upsert") == "upsert" and not channel.get("source_in_key"):
        warnings.append(f"{where}: {pattern.text} merges tables into {template.text}; rows of different tables "
                        f"with the same key replace each other there. If the shards' keys may collide, set "
                        f"table_column (and schema_column) with source_in_key = true")


def _kafka(values: dict[str, Any], where: str, environ: dict[str, str], problems: list[str]) -> KafkaSettings | None:
    """``[job.kafka]``: Canal's Kafka topic, and kafka-python's security settings."""
    where = f"{where}.kafka"
    count = len(problems)
    kafka = _walk(values["kafka"], KAFKA_KEYS, where, problems)
    security = _walk(kafka.get("security", {}), KAFKA_SECURITY_KEYS, f"{where}.security", problems)
    for secret in ("sasl_plain_password", "ssl_password"):
        variable = security.pop(f"{secret}_env", None)
        if variable is None:
            continue
        if secret in security:
            problems.append(f"{where}.security: set {secret} or {secret}_env, not both")
        elif variable not in environ:
            problems.append(f"{where}.security.{secret}_env: environment variable {variable} is not set")
        else:
            security[secret] = environ[variable]
    record_format = kafka.get("format", "flat")
    markers = kafka.get("transaction_markers", record_format == "protobuf")
    if markers and record_format == "flat":
        problems.append(f"{where}.transaction_markers: flat messages carry no transaction ends; only protobuf "
                        "records on an unhashed topic do")
    if len(problems) > count:
        return None
    servers = kafka["bootstrap_servers"]
    return KafkaSettings(
        bootstrap_servers=tuple(s.strip() for s in (servers.split(",") if isinstance(servers, str) else servers)),
        topic=kafka["topic"], group_id=kafka.get("group_id", f"canalbridge-{values.get('name', '')}"),
        record_format=record_format, transaction_markers=markers, security=security,
        **_given(kafka, "client_id", "start_from", "poll_timeout_ms", "max_poll_records", "request_timeout_ms",
                 "debug"),
    )


def _given(values: dict[str, Any], *names: str) -> dict[str, Any]:
    """The keys among ``names`` that the file set."""
    return {name: values[name] for name in names if name in values}


def _check_across_jobs(jobs: list[JobSettings | None], problems: list[str]) -> None:
    names: dict[str, int] = {}
    destinations: dict[tuple[object, ...], int] = {}
    targets: dict[str, str] = {}
    for index, job in enumerate(jobs):
        if job is None:
            continue
        if job.name in names:
            problems.append(f"job[{index}].name: {job.name!r} is already the name of job[{names[job.name]}]")
        names.setdefault(job.name, index)
        if job.canal is not None:
            key: tuple[object, ...] = (job.canal.host, job.canal.port, job.canal.destination)
            if key in destinations:
                problems.append(
                    f"job[{index}].canal: {job.canal.address} destination {job.canal.destination!r} is already "
                    f"read by job[{destinations[key]}]; Canal keeps one ack cursor per destination"
                )
        if job.kafka is not None:
            key = (frozenset(job.kafka.bootstrap_servers), job.kafka.topic, job.kafka.group_id)
            if key in destinations:
                problems.append(
                    f"job[{index}].kafka: topic {job.kafka.topic!r} with group {job.kafka.group_id!r} is already "
                    f"read by job[{destinations[key]}]; the group keeps one committed offset per partition"
                )
        destinations.setdefault(key, index)
        for position, channel in enumerate(job.channels):
            where = f"job[{index}].channel[{position}].target"
            if channel.pattern is not None:
                continue  # (a rule's targets are known as its tables appear; the job checks them then)
            if channel.target in targets:
                problems.append(f"{where}: {channel.target} is already written by {targets[channel.target]}")
            targets.setdefault(channel.target, where)


def _has_password(raw: dict) -> bool:
    def secret(job: object) -> bool:
        if not isinstance(job, dict):
            return False
        canal, kafka = job.get("canal"), job.get("kafka")
        security = kafka.get("security") if isinstance(kafka, dict) else None
        return bool((isinstance(canal, dict) and canal.get("password")) or (isinstance(security, dict) and (
            security.get("sasl_plain_password") or security.get("ssl_password"))))

    jobs = raw.get("job", [])
    return isinstance(jobs, list) and any(secret(job) for job in jobs)


def _world_readable(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


__all__ = ["MB", "Config", "ConfigError", "DaemonSettings", "load_config"]
