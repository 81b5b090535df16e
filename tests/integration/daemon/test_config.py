"""The TOML config: every invalid case names its key path and the file; exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from canalbridge.daemon.config import ConfigError, load_config
from canalbridge.source_db import SourceTls
from canalbridge.sync.source.kafka.settings import KafkaSettings
from tests.configs import VALID, write

REPO = Path(__file__).resolve().parents[3]


def problems(tmp_path: Path, text: str, environ=None) -> list[str]:
    with pytest.raises(ConfigError) as failure:
        load_config(write(tmp_path, text), environ or {})
    assert str(tmp_path / "canalbridge.toml") in str(failure.value)
    return failure.value.problems


def test_valid_config_loads_with_defaults(tmp_path):
    config = load_config(write(tmp_path, VALID), {})
    job = config.jobs[0]
    assert job.source.batch_size == 8192 and job.source.client_id == "1001"
    assert job.commit.interval_seconds == 10 and job.commit.min_events == 10000
    assert job.commit.min_bytes == 15 * 1024 * 1024 and job.commit.max_bytes == 64 * 1024 * 1024
    assert config.daemon.state_dir == (tmp_path / "state").resolve()
    assert config.spark.master == "local[*]" and config.spark.catalog == "lake"
    assert config.spark.spill_dir == str((tmp_path / "state" / "spill").resolve())
    assert job.channels[0].mode == "upsert"


@pytest.mark.parametrize("control, says", [
    (None, None),
    ('"127.0.0.1:8765"', None),
    ('"/run/canalbridge/control.sock"', None),
    ('"unix:/run/canalbridge/control.sock"', None),
    ('"[::1]:8765"', None),
    ('"state/control.sock"', "daemon.control: must be an absolute Unix socket path or host:port, "
                             "got 'state/control.sock'"),
    ('"unix:state/control.sock"', "daemon.control: a Unix socket path must be absolute, "
                                  "got 'unix:state/control.sock'"),
    ('"localhost"', "daemon.control: must be an absolute Unix socket path or host:port, got 'localhost'"),
    ('"127.0.0.1:0"', "daemon.control: must be an absolute Unix socket path or host:port, got '127.0.0.1:0'"),
])
def test_the_control_endpoint_is_a_socket_in_the_state_dir_unless_set_to_a_path_or_host_and_port(
        tmp_path, control, says):
    text = VALID if control is None else VALID.replace('state_dir = "state"',
                                                       f'state_dir = "state"\ncontrol = {control}')
    if says is not None:
        assert problems(tmp_path, text) == [says]
    else:
        assert load_config(write(tmp_path, text), {}).daemon.control == (control and control.strip('"'))


def test_a_control_token_that_cannot_go_in_a_header_is_named_by_its_variable_not_its_value(tmp_path):
    text = VALID.replace('state_dir = "state"', 'state_dir = "state"\ncontrol_token_env = "CONTROL_TOKEN"')
    assert problems(tmp_path, text, {"CONTROL_TOKEN": "s3cret\n"}) == [
        "daemon.control_token_env: the token in CONTROL_TOKEN must be printable ASCII without spaces"]
    assert load_config(write(tmp_path, text), {"CONTROL_TOKEN": "s3cret"}).daemon.control_token == "s3cret"


def with_spark(text: str) -> str:
    return VALID.replace("[[job]]", f"[spark]\n{text}\n\n[[job]]", 1)


def test_spill_dir_is_relative_to_the_config_file(tmp_path):
    config = load_config(write(tmp_path, with_spark('spill_dir = "shared/spill"')), {})
    assert config.spark.spill_dir == str((tmp_path / "shared" / "spill").resolve())
    assert not config.warnings


def test_spill_dir_must_be_a_path_python_can_write(tmp_path):
    assert problems(tmp_path, with_spark('spill_dir = "s3a://bucket/spill"')) == [
        "spark.spill_dir: must be a local (or mounted) path, got 's3a://bucket/spill'"]


def test_a_cluster_staging_through_files_without_a_spill_dir_warns(tmp_path):
    config = load_config(write(tmp_path, with_spark('master = "spark://10.0.0.5:7077"\nstaging = "files"')), {})
    assert any("spark.spill_dir is not set" in warning for warning in config.warnings)
    assert not config.spark.stages_through_driver


def test_a_cluster_stages_through_the_driver_by_default(tmp_path):
    config = load_config(write(tmp_path, with_spark('master = "spark://10.0.0.5:7077"')), {})
    assert config.spark.stages_through_driver and not config.warnings
    local = load_config(write(tmp_path, with_spark('master = "local[2]"')), {})
    assert not local.spark.stages_through_driver


SECRET_CONF = """
[spark.conf]
"spark.sql.catalog.lake.type" = "jdbc"
[spark.conf_env]
"spark.sql.catalog.lake.jdbc.password" = "CATALOG_PASSWORD"
"""


def test_spark_conf_secrets_come_from_the_environment_and_stay_out_of_reprs(tmp_path):
    config = load_config(write(tmp_path, VALID.replace("[[job]]", SECRET_CONF + "\n[[job]]", 1)),
                         {"CATALOG_PASSWORD": "catalog-secret-1"})
    assert config.spark.secret_conf == {"spark.sql.catalog.lake.jdbc.password": "catalog-secret-1"}
    assert "catalog-secret-1" not in repr(config)
    from spark_sink.session import session_conf

    assert session_conf(config.spark)["spark.sql.catalog.lake.jdbc.password"] == "catalog-secret-1"


def test_a_spark_conf_secret_whose_variable_is_unset_or_also_in_conf_is_refused(tmp_path):
    text = VALID.replace("[[job]]", SECRET_CONF + "\n[[job]]", 1)
    assert problems(tmp_path, text) == [
        "spark.conf_env.spark.sql.catalog.lake.jdbc.password: environment variable CATALOG_PASSWORD is not set"]
    both = text.replace('"jdbc"\n', '"jdbc"\n"spark.sql.catalog.lake.jdbc.password" = "x"\n')
    assert problems(tmp_path, both, {"CATALOG_PASSWORD": "y"}) == [
        "spark.conf_env.spark.sql.catalog.lake.jdbc.password: also set in spark.conf; set it in one of the two"]


def test_not_toml(tmp_path):
    assert "not valid TOML" in problems(tmp_path, "[daemon\nstate_dir=")[0]


def test_unknown_key_names_its_path(tmp_path):
    found = problems(tmp_path, VALID.replace('port = 11111', 'port = 11111\nprot = 1'))
    assert any(p.startswith("job[0].canal.prot: unknown key") for p in found)


def test_wrong_type_names_its_path(tmp_path):
    found = problems(tmp_path, VALID.replace("port = 11111", 'port = "11111"'))
    assert found == ["job[0].canal.port: must be int, got str '11111'"]


def test_port_out_of_range(tmp_path):
    assert problems(tmp_path, VALID.replace("port = 11111", "port = 70000")) == [
        "job[0].canal.port: port 70000 is outside 1..65535"]


def test_canal_store_settings_reach_the_commit_policy_and_a_bad_mode_is_named(tmp_path):
    text = VALID.replace("port = 11111", 'port = 11111\nbatch_mode = "ITEMSIZE"\ntransaction_size = 256')
    commit = load_config(write(tmp_path, text), {}).jobs[0].commit
    assert (commit.store_batch_mode, commit.store_transaction_size) == ("ITEMSIZE", 256)
    assert problems(tmp_path, VALID.replace("port = 11111", 'port = 11111\nbatch_mode = "BYTES"')) == [
        "job[0].canal.batch_mode: must be one of MEMSIZE, ITEMSIZE like canal.instance.memory.batch.mode, got 'BYTES'"]


def test_maintenance_is_on_by_default_and_its_section_is_checked(tmp_path):
    assert load_config(write(tmp_path, VALID), {}).jobs[0].maintenance.enabled
    off = VALID.replace("[[job.channel]]", "[job.maintenance]\nenabled = false\ninterval_minutes = 5\n[[job.channel]]")
    maintenance = load_config(write(tmp_path, off), {}).jobs[0].maintenance
    assert (maintenance.enabled, maintenance.interval_minutes) == (False, 5)
    bad = VALID.replace("[[job.channel]]", "[job.maintenance]\ninterval_minutes = 0\nevery = 1\n[[job.channel]]")
    assert problems(tmp_path, bad) == ["job[0].maintenance.every: unknown key (known: enabled, interval_minutes, "
                                       "keep_snapshots_hours, timeout_seconds)",
                                       "job[0].maintenance.interval_minutes: must be positive, got 0"]


def test_dropped_columns_are_kept_truncates_and_renames_ignored_by_default_and_the_choices_are_checked(tmp_path):
    assert not load_config(write(tmp_path, VALID), {}).jobs[0].schema.drop_columns
    drop = VALID.replace("[[job.channel]]", '[job.schema]\ndrop_column = "drop"\n[[job.channel]]')
    assert load_config(write(tmp_path, drop), {}).jobs[0].schema.drop_columns
    assert problems(tmp_path, drop.replace('"drop"', '"delete"')) == [
        "job[0].schema.drop_column: must be one of keep, drop, got 'delete'"]
    assert load_config(write(tmp_path, VALID), {}).jobs[0].schema.truncate == "ignore"
    truncate = VALID.replace("[[job.channel]]", '[job.schema]\ntruncate = "apply"\n[[job.channel]]')
    assert load_config(write(tmp_path, truncate), {}).jobs[0].schema.applies_truncate
    assert not load_config(write(tmp_path, VALID), {}).jobs[0].schema.follows_renames
    follow = VALID.replace("[[job.channel]]", '[job.schema]\nrename_table = "follow"\n[[job.channel]]')
    assert load_config(write(tmp_path, follow), {}).jobs[0].schema.follows_renames
    assert problems(tmp_path, follow.replace('"follow"', '"track"')) == [
        "job[0].schema.rename_table: must be one of ignore, follow, got 'track'"]


def test_missing_required_key(tmp_path):
    assert "job[0].canal.destination: missing required key" in problems(
        tmp_path, VALID.replace('destination = "example"\n', ""))


def test_a_canal_ha_cluster_is_named_by_its_zookeeper_servers_instead_of_host_and_port(tmp_path):
    cluster = VALID.replace('host = "127.0.0.1"\nport = 11111', 'zk_servers = "10.0.0.1:2181,10.0.0.2:2181"')
    source = load_config(write(tmp_path, cluster), {}).jobs[0].source
    assert source.zk_servers == "10.0.0.1:2181,10.0.0.2:2181"
    assert source.address == "zookeeper 10.0.0.1:2181,10.0.0.2:2181"
    assert source.public("***")["zk_servers"] == "10.0.0.1:2181,10.0.0.2:2181" and "host" not in source.public("*")
    both = VALID.replace('port = 11111', 'port = 11111\nzk_servers = "10.0.0.1:2181"')
    assert problems(tmp_path, both) == [
        "job[0].canal: set host and port (one Canal server) or zk_servers (an HA cluster), not both"]
    assert problems(tmp_path, VALID.replace('port = 11111\n', "")) == [
        "job[0].canal.port: missing required key (or zk_servers, for a Canal HA cluster)"]


def test_missing_password_env_variable(tmp_path):
    text = VALID.replace('password = "secret-in-file"', 'password_env = "NO_SUCH_VARIABLE"')
    assert problems(tmp_path, text) == [
        "job[0].canal.password_env: environment variable NO_SUCH_VARIABLE is not set"]
    config = load_config(write(tmp_path, text), {"NO_SUCH_VARIABLE": "from-env"})
    assert config.jobs[0].source.password == "from-env"


def test_target_used_by_two_channels(tmp_path):
    text = VALID + '[[job.channel]]\nsource = "db.u"\ntarget = "lake.db.t"\n'
    assert problems(tmp_path, text) == [
        "job[0].channel[1].target: lake.db.t is already written by job[0].channel[0].target"]


def test_two_jobs_on_one_destination(tmp_path):
    second = VALID.split("[[job]]")[1].replace('name = "a"', 'name = "b"').replace("lake.db.t", "lake.db.t2")
    found = problems(tmp_path, VALID + "[[job]]" + second)
    assert found == ["job[1].canal: 127.0.0.1:11111 destination 'example' is already read by job[0]; "
                     "Canal keeps one ack cursor per destination"]


def test_commit_minimums_beyond_canals_store_warn(tmp_path):
    text = VALID + "[job.commit]\nmin_events = 20000\nmin_bytes = 20000000\n"
    found = load_config(write(tmp_path, text), {}).warnings
    assert any(w.startswith("job[0].commit.min_events: 20000 events exceed what Canal's store holds") for w in found)
    assert any(w.startswith("job[0].commit.min_bytes: 20000000 bytes exceed Canal's store") for w in found)


def test_world_readable_file_with_password_warns(tmp_path):
    path = write(tmp_path, VALID)
    path.chmod(0o644)
    warnings = load_config(path, {}).warnings
    assert warnings and "readable by every user" in warnings[0]
    assert "secret-in-file" not in warnings[0]


def test_a_world_readable_file_with_only_the_snapshots_password_warns_too(tmp_path):
    text = with_snapshot(VALID.replace('password = "secret-in-file"', 'password_env = "CANAL_PW"'),
                         SNAPSHOT.replace('password_env = "SNAPSHOT_PASSWORD"', 'password = "snap-secret"'))
    path = write(tmp_path, text)
    path.chmod(0o600)
    assert not load_config(path, {"CANAL_PW": "x"}).warnings
    path.chmod(0o644)
    warnings = load_config(path, {"CANAL_PW": "x"}).warnings
    assert len(warnings) == 1 and "readable by every user" in warnings[0] and "snap-secret" not in warnings[0]


def test_password_never_in_problems(tmp_path):
    found = problems(tmp_path, VALID.replace('password = "secret-in-file"', "password = 12345"))
    assert found == ["job[0].canal.password: must be str, got int <hidden>"]


def test_example_config_validates(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "canalbridge", "validate", "-c", str(REPO / "deploy" / "canalbridge.example.toml")],
        capture_output=True, text=True, env={"CANAL_PASSWORD": "x", "PATH": "/usr/bin:/bin"}, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "valid (2 job(s), 5 channel(s))" in result.stdout
    assert "warning" not in result.stderr, result.stderr  # (the file a user starts from draws none)


def test_validate_exits_2_with_the_key_path(tmp_path):
    path = write(tmp_path, VALID.replace("port = 11111", "port = -1"))
    result = subprocess.run([sys.executable, "-m", "canalbridge", "validate", "-c", str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert str(path) in result.stderr and "job[0].canal.port" in result.stderr


KAFKA = """
[daemon]
state_dir = "state"

[[job]]
name = "k"
[job.kafka]
bootstrap_servers = "127.0.0.1:9092, 127.0.0.1:9093"
topic = "example"
format = "protobuf"
[job.kafka.security]
security_protocol = "SASL_PLAINTEXT"
sasl_mechanism = "PLAIN"
sasl_plain_username = "bridge"
sasl_plain_password_env = "KAFKA_PASSWORD"
[[job.channel]]
source = "db.t"
target = "lake.db.t"
"""


def test_a_kafka_job_loads_with_its_defaults_and_a_password_from_the_environment(tmp_path):
    job = load_config(write(tmp_path, KAFKA), {"KAFKA_PASSWORD": "from-env"}).jobs[0]
    assert isinstance(job.source, KafkaSettings)
    kafka = job.source
    assert kafka.bootstrap_servers == ("127.0.0.1:9092", "127.0.0.1:9093") and kafka.group_id == "canalbridge-k"
    assert kafka.record_format == "protobuf" and kafka.transaction_markers and kafka.start_from == "earliest"
    assert kafka.security == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                              "sasl_plain_username": "bridge", "sasl_plain_password": "from-env"}
    flat = load_config(write(tmp_path, KAFKA.replace('format = "protobuf"', "")), {"KAFKA_PASSWORD": "x"})
    assert flat.jobs[0].source.record_format == "flat" and not flat.jobs[0].source.transaction_markers


@pytest.mark.parametrize(("change", "says"), [
    (('format = "protobuf"', 'format = "avro"'), "job[0].kafka.format: must be one of flat, protobuf"),
    (('format = "protobuf"', 'format = "flat"\ntransaction_markers = true'),
     "job[0].kafka.transaction_markers: flat messages carry no transaction ends"),
    (('bootstrap_servers = "127.0.0.1:9092, 127.0.0.1:9093"', 'bootstrap_servers = "localhost"'),
     "job[0].kafka.bootstrap_servers: must be host:port"),
    (('topic = "example"\n', ''), "job[0].kafka.topic: missing required key"),
    (('sasl_mechanism = "PLAIN"', 'sasl_mechanism = "PLAIN"\nsasl_plain_password = "in-file"'),
     "job[0].kafka.security: set sasl_plain_password or sasl_plain_password_env, not both"),
    (('security_protocol = "SASL_PLAINTEXT"', 'security_protocol = "SASL_PLAINTEXT"\nbootstrap = 1'),
     "job[0].kafka.security.bootstrap: unknown key"),
    (('[job.kafka]', '[job.canal]\nhost = "h"\nport = 1\ndestination = "d"\n[job.kafka]'),
     "job[0]: give it either [job.canal] (Canal's TCP protocol) or [job.kafka] (Canal's Kafka topic), not both"),
])
def test_a_broken_kafka_source_is_named(tmp_path, change, says):
    found = problems(tmp_path, KAFKA.replace(*change), {"KAFKA_PASSWORD": "from-env"})
    assert any(problem.startswith(says) for problem in found), found


def test_a_job_without_a_source_is_named(tmp_path):
    text = VALID.replace('[job.canal]\nhost = "127.0.0.1"\nport = 11111\ndestination = "example"\n'
                         'password = "secret-in-file"\n', "")
    assert any("none is set" in problem for problem in problems(tmp_path, text))


def test_a_missing_kafka_password_variable_is_named_and_no_secret_shows(tmp_path):
    assert "job[0].kafka.security.sasl_plain_password_env: environment variable KAFKA_PASSWORD is not set" in \
        problems(tmp_path, KAFKA, {})
    both = problems(tmp_path, KAFKA.replace('sasl_mechanism = "PLAIN"', 'sasl_mechanism = "PLAIN"\n'
                                            'sasl_plain_password = "in-file-secret"'), {})
    assert any("not both" in problem for problem in both)
    assert not any("in-file-secret" in problem for problem in both)


def test_two_jobs_on_one_topic_and_group(tmp_path):
    second = KAFKA[KAFKA.index("[[job]]"):].replace('name = "k"', 'name = "k2"\n').replace(
        'target = "lake.db.t"', 'target = "lake.db.u"')
    text = KAFKA.replace("[job.kafka]", '[job.kafka]\ngroup_id = "g"') + second.replace(
        "[job.kafka]", '[job.kafka]\ngroup_id = "g"')
    found = problems(tmp_path, text, {"KAFKA_PASSWORD": "x"})
    assert any("job[1].kafka: topic 'example' with group 'g' is already read by job[0]" in p for p in found), found


def test_a_channel_may_take_tables_by_pattern_into_templated_targets(tmp_path):
    text = VALID.replace('''source = "db.t"
target = "lake.db.t"''', '''source = "shop.*"
target = "lake.shop.{table}"

[[job.channel]]
source_regex = 'shop_\\d+\\.orders_\\d+'
target = "lake.shop.orders"
table_column = "src_table"
schema_column = "src_schema"
source_in_key = true

[[job.channel]]
source = "crm.users"
target = "lake.{schema}.{table}"''')
    config = load_config(write(tmp_path, text), {})
    rule, shards, named = config.jobs[0].channels
    assert (rule.pattern.text, rule.target) == ("shop.*", "lake.shop.{table}")
    assert shards.pattern.regex and shards.origin_columns == ("src_schema", "src_table") and shards.source_in_key
    assert (named.pattern, named.target) == (None, "lake.crm.users")  # a named table's template is filled in
    assert config.jobs[0].canal_filter == r"shop\..*,shop_\d+\.orders_\d+,crm\.users"
    assert not config.warnings


@pytest.mark.parametrize("channel, says", [
    ('source = "shop.*"\nsource_regex = "shop\\\\..*"\ntarget = "lake.s.{table}"', "give it source"),
    ('target = "lake.s.t"', "give it source (schema.table, either part may have * ? [...]) or source_regex, none"),
    ('source = "shop.*"\ntarget = "lake.s.{name}"', "job[0].channel[0].target: 'lake.s.{name}': unknown "
                                                    "placeholder {name}"),
    ('source_regex = "shop\\\\.(a"\ntarget = "lake.s.{table}"', "job[0].channel[0].source_regex: 'shop\\\\.(a' "
                                                               "is not a regex"),
    ('source = "shop_*.o"\ntarget = "lake.s.o"\nsource_in_key = true', "source_in_key: the key takes the columns"),
])
def test_a_broken_pattern_or_template_is_named(tmp_path, channel, says):
    text = VALID.replace('source = "db.t"\ntarget = "lake.db.t"', channel)
    assert any(says in problem for problem in problems(tmp_path, text)), problems(tmp_path, text)


def test_shards_merged_without_their_source_in_the_key_warn_that_keys_may_collide(tmp_path):
    text = VALID.replace('source = "db.t"\ntarget = "lake.db.t"', 'source = "shop_*.orders"\ntarget = "lake.s.orders"')
    warnings = load_config(write(tmp_path, text), {}).warnings
    assert any("rows of different tables with the same key replace each other" in w for w in warnings), warnings


def test_a_batch_size_above_a_quarter_of_the_store_is_capped_with_a_warning(tmp_path):
    config = load_config(write(tmp_path, VALID.replace('password = "secret-in-file"',
                                                       'batch_size = 8192\nstore_capacity = 4096')), {})
    (job,) = config.jobs
    assert job.source.fetch_size(job.commit) == 1024
    assert any(w.startswith("job[0].canal.batch_size: 8192 is more than a quarter of Canal's store (4096): each get "
                            "asks for 1024") for w in config.warnings), config.warnings
    assert not load_config(write(tmp_path, VALID), {}).warnings  # the defaults: 8192 of 16384, capped silently


SNAPSHOT = """
[job.snapshot]
host = "127.0.0.1"
user = "snapshotter"
password_env = "SNAPSHOT_PASSWORD"
signal_table = "db.canalbridge_signal"
"""


def with_snapshot(text: str, snapshot: str = SNAPSHOT) -> str:
    return text.replace("[[job.channel]]", snapshot.strip() + "\n[[job.channel]]", 1)


def test_a_snapshot_reads_its_password_from_the_environment_and_subscribes_to_its_signal_table(tmp_path):
    job = load_config(write(tmp_path, with_snapshot(VALID)), {"SNAPSHOT_PASSWORD": "from-env"}).jobs[0]
    snapshot = job.snapshot
    assert snapshot is not None and snapshot.password == "from-env" and snapshot.port == 3306
    assert snapshot.mode == "initial" and snapshot.chunk_rows == 100_000 and snapshot.parallelism == 4
    assert job.canal_filter.split(",") == ["db\\.t", "db\\.canalbridge_signal"]
    never = load_config(write(tmp_path, with_snapshot(VALID, SNAPSHOT + 'mode = "never"\n')),
                        {"SNAPSHOT_PASSWORD": "x"}).jobs[0]
    assert never.canal_filter.split(",") == ["db\\.t", "db\\.canalbridge_signal"], "its heartbeats come through"
    quiet = load_config(write(tmp_path, with_snapshot(VALID, SNAPSHOT + 'mode = "never"\nheartbeat = false\n')),
                        {"SNAPSHOT_PASSWORD": "x"}).jobs[0]
    assert quiet.canal_filter == "db\\.t", "a snapshot that never runs and no heartbeat read no signal table"
    assert load_config(write(tmp_path, VALID), {}).jobs[0].snapshot is None


@pytest.mark.parametrize("change, says", [
    (("", ""), "job[0].snapshot.password_env: environment variable SNAPSHOT_PASSWORD is not set"),
    (('password_env = "SNAPSHOT_PASSWORD"', 'password_env = "SNAPSHOT_PASSWORD"\npassword = "in-file"'),
     "job[0].snapshot: set password or password_env, not both"),
    (('signal_table = "db.canalbridge_signal"', 'signal_table = "canalbridge_signal"'),
     "job[0].snapshot.signal_table: 'canalbridge_signal' must name schema.table"),
    (('user = "snapshotter"\n', ""), "job[0].snapshot.user: missing required key"),
    (('host = "127.0.0.1"\nuser', 'host = "127.0.0.1"\nmode = "sometimes"\nuser'), "job[0].snapshot.mode: "),
    (('host = "127.0.0.1"\nuser', 'host = "127.0.0.1"\ntls = "required"\nuser'), "job[0].snapshot.tls: "),
    (('host = "127.0.0.1"\nuser', 'host = "127.0.0.1"\ntls_ca = "ca.pem"\nuser'),
     'job[0].snapshot.tls_ca: only `tls = "verify-ca"` or `"verify-full"` checks the server\'s certificate'),
    (('host = "127.0.0.1"\nuser', 'host = "127.0.0.1"\ntls = "verify-full"\ntls_ca = "missing.pem"\nuser'),
     "job[0].snapshot.tls_ca: "),
])
def test_a_broken_snapshot_section_is_named(tmp_path, change, says):
    found = problems(tmp_path, with_snapshot(VALID, SNAPSHOT.replace(*change)), {})
    assert any(problem.startswith(says) for problem in found), found


def test_a_snapshots_tls_ca_is_relative_to_the_config_file_and_both_its_connections_take_it(tmp_path):
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.pem").write_text("(a CA)", encoding="utf-8")
    text = with_snapshot(VALID, SNAPSHOT + 'tls = "verify-full"\ntls_ca = "certs/ca.pem"\n')
    snapshot = load_config(write(tmp_path, text), {"SNAPSHOT_PASSWORD": "x"}).jobs[0].snapshot
    assert snapshot is not None and snapshot.tls_ca == str(tmp_path / "certs" / "ca.pem")
    assert snapshot.source_tls == SourceTls("verify-full", str(tmp_path / "certs" / "ca.pem"))
    plain = load_config(write(tmp_path, with_snapshot(VALID)), {"SNAPSHOT_PASSWORD": "x"}).jobs[0].snapshot
    assert plain is not None and plain.source_tls == SourceTls("disable"), "no TLS unless asked"


def test_a_job_reading_kafka_takes_a_snapshot_too(tmp_path):
    job = load_config(write(tmp_path, with_snapshot(KAFKA)), {"SNAPSHOT_PASSWORD": "x", "KAFKA_PASSWORD": "y"}).jobs[0]
    assert isinstance(job.source, KafkaSettings) and job.snapshot is not None and job.snapshot.active
    assert job.snapshot.signal == ("db", "canalbridge_signal")


def test_a_snapshot_only_job_takes_a_rule_and_one_that_merges_tables(tmp_path):
    only = SNAPSHOT + 'mode = "only"\n'
    assert load_config(write(tmp_path, with_snapshot(VALID, only)), {"SNAPSHOT_PASSWORD": "x"}).jobs[0].snapshot.only
    rule = with_snapshot(VALID, only).replace('source = "db.t"', 'source = "db.t_*"').replace(
        'target = "lake.db.t"', 'target = "lake.db.{table}"')
    assert load_config(write(tmp_path, rule), {"SNAPSHOT_PASSWORD": "x"}).jobs[0].snapshot.only
    merging = rule.replace('target = "lake.db.{table}"', 'target = "lake.db.t_all"')
    assert load_config(write(tmp_path, merging), {"SNAPSHOT_PASSWORD": "x"}).jobs[0].snapshot.only


def test_atomic_cuts_take_upsert_targets_with_equality_deletes_in_one_catalog_and_no_snapshot(tmp_path):
    atomic = VALID.replace("[[job.channel]]", "[job.cuts]\natomic = true\n[[job.channel]]", 1)
    assert load_config(write(tmp_path, atomic), {}).jobs[0].cuts.atomic
    refused = with_snapshot(atomic) + (
        '[[job.channel]]\nsource = "db.u"\ntarget = "other.db.u"\n'
        '[[job.channel]]\nsource = "db.v"\ntarget = "lake.db.v"\nmode = "changelog"\n'
        '[[job.channel]]\nsource = "db.w"\ntarget = "lake.db.w"\nupsert_deletes = "position"\n')
    found = problems(tmp_path, refused, {"SNAPSHOT_PASSWORD": "x"})
    assert found == [
        "job[0].cuts.atomic: a job with [job.snapshot] cannot publish atomically (its chunks are not staged)",
        "job[0].cuts.atomic: every target must be in one catalog, not in lake, other",
        "job[0].channel[2].mode: a job whose cuts are atomic takes upsert targets only",
        "job[0].channel[3].upsert_deletes: a job whose cuts are atomic writes equality deletes, not position deletes",
    ]
    inherited = atomic.replace("[daemon]", '[spark]\nupsert_deletes = "position"\n[daemon]', 1)
    assert problems(tmp_path, inherited) == [
        'job[0].channel[0]: takes spark.upsert_deletes = "position"; a job whose cuts are atomic writes equality '
        "deletes (set the channel's upsert_deletes)"]


def test_a_channels_sort_order_is_checked_as_the_config_loads(tmp_path):
    order = VALID.replace('target = "lake.db.t"', 'target = "lake.db.t"\nsort_by = ["bucket(16, id)", "ts desc"]')
    assert load_config(write(tmp_path, order), {}).jobs[0].channels[0].sort_by == ("bucket(16, id)", "ts desc")
    assert problems(tmp_path, order.replace("ts desc", "ts downwards")) == [
        "job[0].channel[0].sort_by: 'ts downwards': write a column or a transform of one, then ASC or DESC, then "
        "NULLS FIRST or NULLS LAST ('ts downwards' is neither a column nor a transform of one: write a column, or "
        "one of identity(col), bucket(n, col), truncate(w, col), year(col), month(col), day(col), hour(col))"]
    assert problems(tmp_path, order.replace("ts desc", "BUCKET(16, ID) ASC NULLS LAST")) == [
        "job[0].channel[0].sort_by: names the same term twice"]


def test_a_channels_partition_spec_is_checked_as_the_config_loads(tmp_path):
    spec = VALID.replace('target = "lake.db.t"', 'target = "lake.db.t"\npartition_by = ["bucket(16, id)", "day(ts)"]')
    assert load_config(write(tmp_path, spec), {}).jobs[0].channels[0].partition_by == ("bucket(16, id)", "day(ts)")
    assert problems(tmp_path, spec.replace("day(ts)", "week(ts)")) == [
        "job[0].channel[0].partition_by: 'week(ts)': week is not a transform (known: identity, bucket, truncate, "
        "year, month, day, hour)"]
    atomic = spec.replace("[[job.channel]]", "[job.cuts]\natomic = true\n[[job.channel]]", 1)
    # (a partitioned target takes equality deletes too, which a job whose cuts are atomic stages)
    assert load_config(write(tmp_path, atomic), {}).jobs[0].channels[0].partition_by == ("bucket(16, id)", "day(ts)")


def test_table_properties_pass_but_not_those_canalbridge_sets(tmp_path):
    channel = 'target = "lake.db.t"\n[job.channel.table_properties]\n"write.parquet.compression-codec" = "zstd"\n'
    text = VALID.replace('target = "lake.db.t"\n', channel)
    assert load_config(write(tmp_path, text), {}).jobs[0].channels[0].table_properties == {
        "write.parquet.compression-codec": "zstd"}
    assert problems(tmp_path, text + '"canalbridge.primary-key" = "[]"\n') == [
        "job[0].channel[0].table_properties: canalbridge.primary-key: canalbridge.* is canalbridge's own"]
    assert problems(tmp_path, text + '"format-version" = 1\n') == [
        "job[0].channel[0].table_properties: format-version: must be 2 or 3 (format 1 has no delete files)"]
    three = load_config(write(tmp_path, text + '"format-version" = 3\n'), {})
    assert three.jobs[0].channels[0].table_properties["format-version"] == 3


SHAPED = ('target = "lake.db.t"\nexclude = ["note"]\nmask = ["email"]\nrow_filter = "status <> \'cancelled\'"\n'
          '[job.channel.computed]\norder_day = "to_date(created)"\n')


def test_a_channels_shaping_is_read_with_the_salt_from_the_environment_and_never_shown(tmp_path):
    text = VALID.replace('target = "lake.db.t"\n', SHAPED)
    salt = "sixteen or more characters"
    config = load_config(write(tmp_path, text), {"CANALBRIDGE_MASK_SALT": salt})
    channel = config.jobs[0].channels[0]
    assert (channel.exclude, channel.mask, channel.computed, channel.row_filter) == (
        ("note",), ("email",), {"order_day": "to_date(created)"}, "status <> 'cancelled'")
    assert config.spark.mask_salt == salt and salt not in repr(config)
    other = text.replace("[daemon]", '[spark]\nmask_salt_env = "ORDERS_SALT"\n[daemon]', 1)
    assert load_config(write(tmp_path, other), {"ORDERS_SALT": salt}).spark.mask_salt == salt

    assert problems(tmp_path, text) == [
        "spark.mask_salt_env (a channel masks columns): environment variable CANALBRIDGE_MASK_SALT is not set"]
    assert problems(tmp_path, text, {"CANALBRIDGE_MASK_SALT": "short"}) == [
        "spark.mask_salt_env: the salt in CANALBRIDGE_MASK_SALT must be at least 16 characters"]
    unmasked = VALID.replace('target = "lake.db.t"\n', 'target = "lake.db.t"\nexclude = ["note"]\n')
    assert load_config(write(tmp_path, unmasked), {}).spark.mask_salt == "", "no mask, no salt asked for"


def test_shaping_entries_that_contradict_each_other_are_named(tmp_path):
    text = VALID.replace('target = "lake.db.t"\n', 'target = "lake.db.t"\nkey = ["id"]\nexclude = ["ID", "email"]\n'
                         'mask = ["email"]\npartition_by = ["day(email)"]\nsort_by = ["email DESC"]\n'
                         '[job.channel.computed]\nEmail = "lower(email)"\n_day = "to_date(created)"\n')
    assert problems(tmp_path, text, {"CANALBRIDGE_MASK_SALT": "sixteen or more characters"}) == [
        "job[0].channel[0].computed: _day: names starting with _ are canalbridge's own columns",
        "job[0].channel[0].mask: email is also excluded; keep it in one of the two",
        "job[0].channel[0].exclude: id is a key column; a target keeps its key",
        "job[0].channel[0].partition_by: day(email) names email, which exclude leaves out of the target",
        "job[0].channel[0].sort_by: email DESC names email, which exclude leaves out of the target"]
    computed = VALID.replace('target = "lake.db.t"\n', 'target = "lake.db.t"\nmask = ["email"]\n'
                             '[job.channel.computed]\nEmail = "lower(email)"\n')
    assert problems(tmp_path, computed, {"CANALBRIDGE_MASK_SALT": "sixteen or more characters"}) == [
        "job[0].channel[0].computed.email: also in exclude or mask, which name the row's own columns"]


def test_metadata_columns_and_soft_deletes_are_an_upsert_targets(tmp_path):
    text = VALID.replace('target = "lake.db.t"\n', 'target = "lake.db.t"\nmetadata = ["op", "position", "schema"]\n'
                         'deletes = "soft"\n')
    channel = load_config(write(tmp_path, text), {}).jobs[0].channels[0]
    assert channel.change_columns == ("_source_op", "_source_position", "_is_deleted", "_deleted_at")
    assert channel.origin_columns == ("_source_schema",), "the source's schema: a column the rows carry"
    assert problems(tmp_path, text.replace('deletes = "soft"', 'mode = "changelog"')) == [
        "job[0].channel[0]: metadata (op, source_time, position) and soft deletes are an upsert target's; a "
        "changelog target records each change with its _op, _journal, _offset and _execute_time"]
    assert problems(tmp_path, text.replace('"schema"]', '"schema", "gtid"]')) == [
        "job[0].channel[0].metadata: must name some of op, source_time, position, schema, table, not 'gtid'"]
    assert problems(tmp_path, text.replace('deletes = "soft"', 'schema_column = "db"')) == [
        "job[0].channel[0].metadata: schema and schema_column both name the source's schema's column; keep one"]
