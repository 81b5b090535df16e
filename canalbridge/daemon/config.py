"""The TOML configuration: load, validate, and turn into settings.

Each key is declared once, in the field of its settings class
(:func:`canalbridge.sync.options.setting`: type, default, check,
description): this module walks those declarations, turns the values into
settings, and adds the checks across keys. Every problem is reported with
the file and the key path (``job[0].canal.port``), all of them at once, and
nothing starts: the ``canalbridge`` commands exit with status 2. Passwords
are never echoed.

Its length: the loader walks each table of the file, and each table's checks across keys sit beside
its walk.
"""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from canalbridge.daemon.control_access import SOCKET_NAME, address_problem
from canalbridge.daemon.control_token import TOKEN_NAME
from canalbridge.source_db.tls import VERIFYING
from canalbridge.sync.errors import PatternError
from canalbridge.sync.model.partitions import PartitionField, PartitionSpecError
from canalbridge.sync.model.sort_order import SortField
from canalbridge.sync.model.tables import TablePattern, TargetTemplate, merges
from canalbridge.sync.options import Option, non_empty, one_of, options_of, port_or_zero, setting, toml_value
from canalbridge.sync.settings import (
    CHANNEL_SOURCE_REGEX,
    GET_SHARE_OF_STORE,
    JOB_SOURCES,
    MB,
    METADATA_COLUMNS,
    ChannelSettings,
    CommitSettings,
    CutSettings,
    JobSettings,
    MaintenanceSettings,
    SchemaSettings,
    SnapshotSettings,
)
from canalbridge.sync.source.canal.settings import CanalSettings
from canalbridge.sync.source.kafka.settings import KAFKA_SECURITY, KafkaSettings
from spark_sink.settings import MASK_SALT_ENV, SparkSettings


class ConfigError(Exception):
    """The configuration cannot be used; ``problems`` lists each key path and what is wrong."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        listed = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"{path}: invalid configuration:\n{listed}")


@dataclass(frozen=True)
class DaemonSettings:
    """The ``[daemon]`` section: the process, its state and how it is reached."""

    SECTION: ClassVar[str] = "daemon"

    state_dir: Path = setting(doc="SQLite state, lock file, spill files (unless `spark.spill_dir`); relative to the "
                                  "config file", check=non_empty)
    control: str | None = setting(None, check=address_problem,
                                  default_text=f"a Unix socket, `{SOCKET_NAME}` in `state_dir`, mode 0600",
                                  doc="the control endpoint: an absolute Unix socket path, or `host:port` (TCP, "
                                      "which always asks for a token; see the operations page)")
    # The token itself; the file names the variable that holds it.
    control_token: str | None = setting(None, name="control_token_env", check=non_empty, secret=True,
                                        default_text="none",
                                        doc="the environment variable holding a token every control request must "
                                            f"carry; without it a TCP endpoint asks for the one the daemon writes "
                                            f"to `{TOKEN_NAME}` in `state_dir` (mode 0600) at its first start")
    log_format: str = setting("console", check=one_of("console", "json"), doc="`json` lines for journald")
    log_level: str = setting("info", check=one_of("debug", "info", "warning", "error"), doc="the least level logged")
    metrics_port: int = setting(0, check=port_or_zero, doc="Prometheus `/metrics` on `metrics_host`; 0: off")
    metrics_host: str = setting("127.0.0.1", check=non_empty,
                                doc="the address `/metrics` listens on: `127.0.0.1` (this host only), an interface's "
                                    "address, or `0.0.0.0` for every interface, for a Prometheus on another host; a "
                                    "request whose `Host` names neither an address, this host's name nor "
                                    "`metrics_host` is refused (403)")


@dataclass(frozen=True)
class Config:
    """A whole configuration file, validated."""

    path: Path
    daemon: DaemonSettings
    spark: SparkSettings
    jobs: tuple[JobSettings, ...]
    warnings: tuple[str, ...] = ()


# -- the declarations, by TOML table --------------------------------------------------------------

SETTINGS_CLASSES = (DaemonSettings, SparkSettings, JobSettings, CanalSettings, KafkaSettings, CommitSettings,
                    MaintenanceSettings, SchemaSettings, CutSettings, SnapshotSettings, ChannelSettings)
LOADER_OPTIONS = (*JOB_SOURCES, CHANNEL_SOURCE_REGEX, *KAFKA_SECURITY)


def declared_options() -> dict[str, dict[str, Option]]:
    """Every key of the file, by TOML table (``job.commit``) and name, in declaration order."""
    tables: dict[str, dict[str, Option]] = {}
    for option in (*(o for cls in SETTINGS_CLASSES for o in options_of(cls)), *LOADER_OPTIONS):
        tables.setdefault(option.section, {})[option.name] = option
    return tables


OPTIONS = declared_options()


def _walk(table: Any, section: str, where: str, problems: list[str]) -> dict[str, Any]:
    """Check one TOML table against the keys declared for ``section``; the values that passed, by key name."""
    if not isinstance(table, dict):
        problems.append(f"{where}: must be a table, got {type(table).__name__}")
        return {}
    keys = OPTIONS[section]
    for name in table:
        if name not in keys:
            problems.append(f"{where}.{name}: unknown key (known: {', '.join(sorted(keys))})")
    values: dict[str, Any] = {}
    for name, option in keys.items():
        if name not in table:
            if option.required:
                problems.append(f"{where}.{name}: missing required key")
            continue
        reason = option.problem(table[name])
        if reason:
            problems.append(f"{where}.{name}: {reason}")
            continue
        values[name] = table[name]
    return values


def _attributes(cls: type, tables: dict[str, dict[str, Any]], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keyword arguments of ``cls`` that the file set, from walked values by TOML table.

    Only the keys given are passed: each default lives in its declaration.
    """
    found: dict[str, Any] = {}
    for option in options_of(cls):
        values = tables.get(option.section, {})
        if option.attribute is not None and option.attribute not in skip and option.name in values:
            found[option.attribute] = toml_value(values[option.name])
    return found


# -- loading -------------------------------------------------------------------------------

def load_config(path: Path, environ: dict[str, str] | None = None, *, secrets: bool = True) -> Config:
    """Read and validate ``path``; raise ConfigError listing every problem.

    With ``secrets=False`` (``status``, which connects to no source) a password or token variable that is
    not set is no problem: that secret is left empty.
    """
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
    secret = _Secrets(environ, secrets, problems)
    for name in raw:
        if name not in ("daemon", "spark", "job"):
            problems.append(f"{name}: unknown section (known: daemon, spark, job)")
    daemon_values = _walk(raw.get("daemon", {}), "daemon", "daemon", problems)
    if "daemon" not in raw:
        problems.append("daemon: missing required section")
    spark_values = _walk(raw.get("spark", {}), "spark", "spark", problems)
    for conf_key, conf_value in spark_values.get("conf", {}).items():
        if not isinstance(conf_value, (str, int, float, bool)):
            problems.append(f"spark.conf.{conf_key}: must be a string, number or boolean")
    secret_conf: dict[str, str] = {}  # spark.* keys whose values (passwords, keys) the environment holds
    for conf_key, variable in spark_values.get("conf_env", {}).items():
        if conf_key in spark_values.get("conf", {}):
            problems.append(f"spark.conf_env.{conf_key}: also set in spark.conf; set it in one of the two")
        elif not isinstance(variable, str) or not variable:
            problems.append(f"spark.conf_env.{conf_key}: must name an environment variable")
        else:
            secret_conf[conf_key] = secret.read(variable, f"spark.conf_env.{conf_key}")
    raw_jobs = raw.get("job", [])
    if not isinstance(raw_jobs, list) or not raw_jobs:
        problems.append("job: at least one [[job]] is required")
        raw_jobs = []

    if "control_token_env" in daemon_values:  # the token itself replaces the variable's name
        token = secret.read(daemon_values["control_token_env"], "daemon.control_token_env", empty_is_unset=True)
        if not all(33 <= ord(char) <= 126 for char in token):  # (sent in a header; never shown)
            problems.append(f"daemon.control_token_env: the token in {daemon_values['control_token_env']} must be "
                            f"printable ASCII without spaces")
            token = ""
        daemon_values["control_token_env"] = token or None
    jobs = [_job(raw_job, index, path.parent, secret, problems, warnings) for index, raw_job in enumerate(raw_jobs)]
    if any(channel.mask for job in jobs if job is not None for channel in job.channels):
        spark_values["mask_salt"] = _mask_salt(spark_values.get("mask_salt_env", MASK_SALT_ENV), secret, problems)
    _check_across_jobs(jobs, problems)
    for index, job in enumerate(jobs):
        if job is not None and job.cuts.atomic:
            _check_atomic(job, f"job[{index}]", spark_values.get("upsert_deletes", "auto"), problems)
    if _has_password(raw) and _world_readable(path):
        warnings.append(f"{path} holds a password and is readable by every user: chmod 600 it or use password_env")
    if problems:
        raise ConfigError(path, problems)

    base = path.parent
    state_dir = (base / daemon_values["state_dir"]).resolve()
    daemon = DaemonSettings(state_dir=state_dir,
                            **_attributes(DaemonSettings, {"daemon": daemon_values}, skip=("state_dir",)))
    spark = SparkSettings(
        warehouse=str((base / spark_values.get("warehouse", str(state_dir / "warehouse"))).resolve()),
        conf={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark_values.get("conf", {}).items()},
        secret_conf=secret_conf,
        spill_dir=str((base / spark_values.get("spill_dir", str(state_dir / "spill"))).resolve()),
        jars_dir=str((base / spark_values["jars_dir"]).resolve()) if "jars_dir" in spark_values else None,
        reads_sources=any(job is not None and job.snapshot is not None for job in jobs),
        **_attributes(SparkSettings, {"spark": spark_values},
                      skip=("warehouse", "conf", "secret_conf", "spill_dir", "jars_dir")),
        mask_salt=spark_values.get("mask_salt", ""),
    )
    if not spark.master.startswith("local") and spark.staging == "files" and "spill_dir" not in spark_values:
        warnings.append(f"spark.master is {spark.master!r} with staging = \"files\" but spark.spill_dir is not set: "
                        f"every commit's staged files go to {spark.spill_dir}, which every executor must read at the "
                        f"same path")
    return Config(path, daemon, spark, tuple(j for j in jobs if j is not None), tuple(warnings))


class _Secrets:
    """Reads the secrets a file names by environment variable; one not set is a problem only when needed."""

    def __init__(self, environ: dict[str, str], needed: bool, problems: list[str]) -> None:
        self.environ = environ
        self.needed = needed
        self.problems = problems

    def read(self, variable: str, where: str, *, empty_is_unset: bool = False) -> str:
        value = self.environ.get(variable)
        if value is None or (not value and empty_is_unset):
            if self.needed:
                self.problems.append(f"{where}: environment variable {variable} is not set")
            return ""
        return value


def _job(raw: Any, index: int, base: Path, secret: _Secrets, problems: list[str],
         warnings: list[str]) -> JobSettings | None:
    where = f"job[{index}]"
    count = len(problems)
    values = _walk(raw, "job", where, problems)
    canal = _walk(values.get("canal", {}), "job.canal", f"{where}.canal", problems) if "canal" in values else {}
    kafka = _kafka(values, where, secret, problems) if "kafka" in values else None
    if isinstance(raw, dict) and ("canal" in raw) == ("kafka" in raw):
        problems.append(f"{where}: give it either [job.canal] (Canal's TCP protocol) or [job.kafka] (Canal's "
                        f"Kafka topic), {'not both' if 'canal' in raw else 'none is set'}")
    commit = _walk(values.get("commit", {}), "job.commit", f"{where}.commit", problems)
    maintenance = _walk(values.get("maintenance", {}), "job.maintenance", f"{where}.maintenance", problems)
    schema = _walk(values.get("schema", {}), "job.schema", f"{where}.schema", problems)
    cuts = _walk(values.get("cuts", {}), "job.cuts", f"{where}.cuts", problems)
    channels = []
    for position, raw_channel in enumerate(values.get("channel", [])):
        channel_where = f"{where}.channel[{position}]"
        channel = _walk(raw_channel, "job.channel", channel_where, problems)
        given = set(raw_channel) if isinstance(raw_channel, dict) else set()
        _check_shaping(channel, channel_where, problems)  # (first: metadata's origin columns are checked with theirs)
        _channel_tables(channel, given, channel_where, problems, warnings)
        channels.append(channel)
    if "channel" in values and not values["channel"]:
        problems.append(f"{where}.channel: at least one [[job.channel]] is required")

    # (By the keys the file gave: a value the walk refused was named already.)
    given = set(values["canal"]) if isinstance(values.get("canal"), dict) else set()
    if "canal" not in values:
        pass  # (a Kafka job, or none: said above)
    elif "zk_servers" in given and given & {"host", "port"}:
        problems.append(f"{where}.canal: set host and port (one Canal server) or zk_servers (an HA cluster), not both")
    elif "zk_servers" not in given:
        for key in ("host", "port"):
            if key not in given:
                problems.append(f"{where}.canal.{key}: missing required key (or zk_servers, for a Canal HA cluster)")
    elif "zk_servers" in canal:
        canal.setdefault("host", "")
        canal.setdefault("port", 0)
    if "password" in canal and "password_env" in canal:
        problems.append(f"{where}.canal: set password or password_env, not both")
    elif "password_env" in canal:
        canal["password"] = secret.read(canal["password_env"], f"{where}.canal.password_env")
    snapshot = _snapshot(values, where, base, secret, problems) if "snapshot" in values else None

    commit_settings = CommitSettings(**_attributes(CommitSettings, {"job.commit": commit, "job.canal": canal}))
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
    asked = canal.get("batch_size")
    if asked is not None and asked > store_capacity // GET_SHARE_OF_STORE:
        warnings.append(
            f"{where}.canal.batch_size: {asked} is more than a quarter of Canal's store ({store_capacity}): each get "
            f"asks for {commit_settings.store_share}, so that no get can fill the store in the "
            f"middle of a source transaction (which would force a commit to split it)"
        )
    if commit_settings.max_bytes < commit_settings.min_bytes:
        problems.append(f"{where}.commit.max_bytes: smaller than min_bytes ({commit_settings.min_bytes})")
    if len(problems) > count:
        return None
    return JobSettings(
        name=values["name"],
        source=CanalSettings(**_attributes(CanalSettings, {"job.canal": canal})) if kafka is None else kafka,
        channels=tuple(ChannelSettings(pattern=channel.get("pattern"),
                                       **_attributes(ChannelSettings, {"job.channel": channel}))
                       for channel in channels),
        commit=commit_settings,
        maintenance=MaintenanceSettings(**_attributes(MaintenanceSettings, {"job.maintenance": maintenance})),
        schema=SchemaSettings(**_attributes(SchemaSettings, {"job.schema": schema})),
        cuts=CutSettings(**_attributes(CutSettings, {"job.cuts": cuts})),
        snapshot=None if snapshot is None else SnapshotSettings(**_attributes(SnapshotSettings,
                                                                              {"job.snapshot": snapshot})),
    )


def _snapshot(values: dict[str, Any], where: str, base: Path, secret: _Secrets, problems: list[str]) -> dict[str, Any]:
    """``[job.snapshot]``: the source database's connection (``tls_ca`` relative to the file's folder)."""
    where = f"{where}.snapshot"
    snapshot = _walk(values["snapshot"], "job.snapshot", where, problems)
    if "password" in snapshot and "password_env" in snapshot:
        problems.append(f"{where}: set password or password_env, not both")
    elif "password_env" in snapshot:
        snapshot["password"] = secret.read(snapshot["password_env"], f"{where}.password_env")
    if isinstance(snapshot.get("tls_ca"), str) and snapshot["tls_ca"]:
        ca = snapshot["tls_ca"] = str((base / snapshot["tls_ca"]).resolve())
        if snapshot.get("tls") not in VERIFYING:
            problems.append(f"{where}.tls_ca: only `tls = \"verify-ca\"` or `\"verify-full\"` checks the "
                            f"server's certificate; set one of them, or remove tls_ca")
        elif secret.needed and (not os.access(ca, os.R_OK) or not os.path.isfile(ca)):  # (as the daemon reads it)
            problems.append(f"{where}.tls_ca: {ca} is not a file this user can read")
    return snapshot


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


def _check_shaping(channel: dict[str, Any], where: str, problems: list[str]) -> None:
    """A channel's shaping settings against each other (the expressions are Spark's to read, at start)."""
    def named(key: str) -> set[str]:
        value = channel.get(key)
        return {name.lower() for name in value} if isinstance(value, (list, tuple, dict)) else set()

    excluded, masked, computed = named("exclude"), named("mask"), named("computed")
    for name in sorted(excluded & masked):
        problems.append(f"{where}.mask: {name} is also excluded; keep it in one of the two")
    for name in sorted(named("key") & excluded):
        problems.append(f"{where}.exclude: {name} is a key column; a target keeps its key")
    for name in sorted(computed & (excluded | masked)):
        problems.append(f"{where}.computed.{name}: also in exclude or mask, which name the row's own columns")
    metadata = channel.get("metadata") or ()
    changelog = channel.get("mode") == "changelog"
    if changelog and (channel.get("deletes") == "soft" or set(metadata) & {"op", "source_time", "position"}):
        problems.append(f"{where}: metadata (op, source_time, position) and soft deletes are an upsert target's; a "
                        f"changelog target records each change with its _op, _journal, _offset and _execute_time")
    for name, key in (("schema", "schema_column"), ("table", "table_column")):
        if name not in metadata:
            continue
        if "columns" in channel:
            problems.append(f"{where}.metadata: {name} adds a column an explicit columns list does not name; "
                            f"drop one of the two")
        elif key in channel:
            problems.append(f"{where}.metadata: {name} and {key} both name the source's {name}'s column; keep "
                            f"one")
        else:
            channel[key] = METADATA_COLUMNS[name]  # (rows carry it, as a merged target's origin)
    layout = [("partition_by", entry, PartitionField.parse) for entry in channel.get("partition_by") or ()] + [
        ("sort_by", entry, lambda text: SortField.parse(text).term) for entry in channel.get("sort_by") or ()]
    for key, entry, parse in layout:
        try:
            column = parse(entry).column.lower()
        except PartitionSpecError:
            continue  # (its own check named it)
        if column in excluded:
            problems.append(f"{where}.{key}: {entry} names {column}, which exclude leaves out of the target")


MASK_SALT_LENGTH = 16  # a shorter salt makes the masked values a short dictionary search away


def _mask_salt(variable: str, secret: _Secrets, problems: list[str]) -> str:
    """The salt ``mask`` columns are keyed by, from the environment; never shown."""
    salt = secret.read(variable, "spark.mask_salt_env (a channel masks columns)", empty_is_unset=True)
    if salt and len(salt) < MASK_SALT_LENGTH:
        problems.append(f"spark.mask_salt_env: the salt in {variable} must be at least {MASK_SALT_LENGTH} "
                        f"characters")
    return salt


def _kafka(values: dict[str, Any], where: str, secret: _Secrets, problems: list[str]) -> KafkaSettings | None:
    """``[job.kafka]``: Canal's Kafka topic, and kafka-python's security settings."""
    where = f"{where}.kafka"
    count = len(problems)
    kafka = _walk(values["kafka"], "job.kafka", where, problems)
    security = _walk(kafka.get("security", {}), "job.kafka.security", f"{where}.security", problems)
    for name in ("sasl_plain_password", "ssl_password"):
        variable = security.pop(f"{name}_env", None)
        if variable is None:
            continue
        if name in security:
            problems.append(f"{where}.security: set {name} or {name}_env, not both")
        else:
            security[name] = secret.read(variable, f"{where}.security.{name}_env")
    record_format = kafka.get("format", "flat")
    markers = kafka.get("transaction_markers", record_format == "protobuf")
    if markers and record_format == "flat":
        problems.append(f"{where}.transaction_markers: flat messages carry no transaction ends; only protobuf "
                        "records on an unhashed topic do")
    if len(problems) > count:
        return None
    servers = kafka["bootstrap_servers"]
    kafka.update(bootstrap_servers=[s.strip() for s in (servers.split(",") if isinstance(servers, str) else servers)],
                 group_id=kafka.get("group_id", f"canalbridge-{values.get('name', '')}"),
                 transaction_markers=markers, security=security)
    return KafkaSettings(**_attributes(KafkaSettings, {"job.kafka": kafka}))


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
        key = job.source.identity
        if key in destinations:
            problems.append(f"job[{index}].{job.source.KIND}: {job.source.already_read(f'job[{destinations[key]}]')}")
        destinations.setdefault(key, index)
        for position, channel in enumerate(job.channels):
            where = f"job[{index}].channel[{position}].target"
            if channel.pattern is not None:
                continue  # (a rule's targets are known as its tables appear; the job checks them then)
            if channel.target in targets:
                problems.append(f"{where}: {channel.target} is already written by {targets[channel.target]}")
            targets.setdefault(channel.target, where)


def _check_atomic(job: JobSettings, where: str, upsert_deletes: str, problems: list[str]) -> None:
    """What a job whose cuts are atomic cannot have: each commit of every target must be one staged RowDelta,
    all in one catalog."""
    said = f"{where}.cuts.atomic"
    if job.snapshot is not None:
        problems.append(f"{said}: a job with [job.snapshot] cannot publish atomically (its chunks are not staged)")
    catalogs = sorted({channel.target.split(".", 1)[0].lower() for channel in job.channels})
    if len(catalogs) > 1:
        problems.append(f"{said}: every target must be in one catalog, not in {', '.join(catalogs)}")
    for index, channel in enumerate(job.channels):
        if channel.mode != "upsert":
            problems.append(f"{where}.channel[{index}].mode: a job whose cuts are atomic takes upsert targets only")
        elif channel.upsert_deletes == "position":
            problems.append(f"{where}.channel[{index}].upsert_deletes: a job whose cuts are atomic writes equality "
                            f"deletes, not position deletes")
        elif channel.upsert_deletes is None and upsert_deletes == "position":
            problems.append(f"{where}.channel[{index}]: takes spark.upsert_deletes = \"position\"; a job whose cuts "
                            f"are atomic writes equality deletes (set the channel's upsert_deletes)")


def _has_password(raw: dict) -> bool:
    """Whether the file itself holds a password: Canal's, the snapshot source's, or Kafka's."""
    def secret(job: object) -> bool:
        if not isinstance(job, dict):
            return False
        canal, kafka, snapshot = job.get("canal"), job.get("kafka"), job.get("snapshot")
        security = kafka.get("security") if isinstance(kafka, dict) else None
        return bool(any(isinstance(section, dict) and section.get("password") for section in (canal, snapshot))
                    or (isinstance(security, dict) and (security.get("sasl_plain_password")
                                                        or security.get("ssl_password"))))

    jobs = raw.get("job", [])
    return isinstance(jobs, list) and any(secret(job) for job in jobs)


def _world_readable(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


__all__ = ["MB", "Config", "ConfigError", "DaemonSettings", "load_config"]
