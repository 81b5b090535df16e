"""Canal's two configuration files, laid out as Canal ships them: its defaults first, then what a setup changes.

``canal.properties`` (the server) and ``<destination>/instance.properties``
(one destination) are written as Canal 1.1.7's deployer ships them: every
key of the stock files that a tcp or Kafka-mode server reads, with Canal's
default values and its ``${...}`` placeholders, then a second section with
the keys this setup changes. The RocketMQ, RabbitMQ and Pulsar sections of
the stock ``canal.properties`` are left out (no plugin for them is fetched).
``docs/getting-started.md`` shows both files as :func:`render` writes them,
and a test keeps the page equal to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from canalbridge.canal.server_defaults import STORE_BATCH_MODE, STORE_BUFFER_SIZE, STORE_MEMUNIT, TRANSACTION_SIZE

# Canal 1.1.7's stock canal.properties, section by section (the keys and values of the deployer's file).
SERVER_DEFAULTS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("common", (
        ("canal.ip", ""),
        ("canal.register.ip", ""),
        ("canal.port", "11111"),
        ("canal.metrics.pull.port", "11112"),
        ("canal.admin.port", "11110"),
        ("canal.admin.user", "admin"),
        ("canal.admin.passwd", "4ACFE3202A5FF5CF467898FC58AAB1D615029441"),
        ("canal.zkServers", ""),
        ("canal.zookeeper.flush.period", "1000"),
        ("canal.withoutNetty", "false"),
        ("canal.serverMode", "tcp"),
        ("canal.file.data.dir", "${canal.conf.dir}"),
        ("canal.file.flush.period", "1000"),
        ("canal.instance.memory.buffer.size", str(STORE_BUFFER_SIZE)),
        ("canal.instance.memory.buffer.memunit", str(STORE_MEMUNIT)),
        ("canal.instance.memory.batch.mode", STORE_BATCH_MODE),
        ("canal.instance.memory.rawEntry", "true"),
        ("canal.instance.detecting.enable", "false"),
        ("canal.instance.detecting.sql", "select 1"),
        ("canal.instance.detecting.interval.time", "3"),
        ("canal.instance.detecting.retry.threshold", "3"),
        ("canal.instance.detecting.heartbeatHaEnable", "false"),
        ("canal.instance.transaction.size", str(TRANSACTION_SIZE)),
        ("canal.instance.fallbackIntervalInSeconds", "60"),
        ("canal.instance.network.receiveBufferSize", "16384"),
        ("canal.instance.network.sendBufferSize", "16384"),
        ("canal.instance.network.soTimeout", "30"),
        ("canal.instance.filter.druid.ddl", "true"),
        ("canal.instance.filter.query.dcl", "false"),
        ("canal.instance.filter.query.dml", "false"),
        ("canal.instance.filter.query.ddl", "false"),
        ("canal.instance.filter.table.error", "false"),
        ("canal.instance.filter.rows", "false"),
        ("canal.instance.filter.transaction.entry", "false"),
        ("canal.instance.filter.dml.insert", "false"),
        ("canal.instance.filter.dml.update", "false"),
        ("canal.instance.filter.dml.delete", "false"),
        ("canal.instance.binlog.format", "ROW,STATEMENT,MIXED"),
        ("canal.instance.binlog.image", "FULL,MINIMAL,NOBLOB"),
        ("canal.instance.get.ddl.isolation", "false"),
        ("canal.instance.parser.parallel", "true"),
        ("canal.instance.parser.parallelBufferSize", "256"),
        ("canal.instance.tsdb.enable", "true"),
        ("canal.instance.tsdb.dir", "${canal.file.data.dir:../conf}/${canal.instance.destination:}"),
        ("canal.instance.tsdb.url", "jdbc:h2:${canal.instance.tsdb.dir}/h2;CACHE_SIZE=1000;MODE=MYSQL;"),
        ("canal.instance.tsdb.dbUsername", "canal"),
        ("canal.instance.tsdb.dbPassword", "canal"),
        ("canal.instance.tsdb.snapshot.interval", "24"),
        ("canal.instance.tsdb.snapshot.expire", "360"),
    )),
    ("destinations", (
        ("canal.destinations", "example"),
        ("canal.conf.dir", "../conf"),
        ("canal.auto.scan", "true"),
        ("canal.auto.scan.interval", "5"),
        ("canal.auto.reset.latest.pos.mode", "false"),
        ("canal.instance.tsdb.spring.xml", "classpath:spring/tsdb/h2-tsdb.xml"),
        ("canal.instance.global.mode", "spring"),
        ("canal.instance.global.lazy", "false"),
        ("canal.instance.global.manager.address", "${canal.admin.manager}"),
        ("canal.instance.global.spring.xml", "classpath:spring/file-instance.xml"),
    )),
    ("MQ", (
        ("canal.mq.flatMessage", "true"),
        ("canal.mq.canalBatchSize", "50"),
        ("canal.mq.canalGetTimeout", "100"),
        ("canal.mq.accessChannel", "local"),
        ("canal.mq.database.hash", "true"),
        ("canal.mq.send.thread.size", "30"),
        ("canal.mq.build.thread.size", "8"),
    )),
    ("Kafka", (
        ("kafka.bootstrap.servers", "127.0.0.1:9092"),
        ("kafka.acks", "all"),
        ("kafka.compression.type", "none"),
        ("kafka.batch.size", "16384"),
        ("kafka.linger.ms", "1"),
        ("kafka.max.request.size", "1048576"),
        ("kafka.buffer.memory", "33554432"),
        ("kafka.max.in.flight.requests.per.connection", "1"),
        ("kafka.retries", "0"),
    )),
)

# Canal 1.1.7's stock example/instance.properties (the keys and values of the deployer's file).
INSTANCE_DEFAULTS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("instance", (
        ("canal.instance.gtidon", "false"),
        ("canal.instance.master.address", "127.0.0.1:3306"),
        ("canal.instance.master.journal.name", ""),
        ("canal.instance.master.position", ""),
        ("canal.instance.master.timestamp", ""),
        ("canal.instance.master.gtid", ""),
        ("canal.instance.tsdb.enable", "true"),
        ("canal.instance.dbUsername", "canal"),
        ("canal.instance.dbPassword", "canal"),
        ("canal.instance.connectionCharset", "UTF-8"),
        ("canal.instance.enableDruid", "false"),
        ("canal.instance.filter.regex", r".*\..*"),
        ("canal.instance.filter.black.regex", r"mysql\.slave_.*"),
        ("canal.mq.topic", "example"),
        ("canal.mq.partition", "0"),
        ("canal.instance.multi.stream.on", "false"),
    )),
)


def render(defaults: tuple[tuple[str, tuple[tuple[str, str], ...]], ...], changes: Mapping[str, str],
           *, what: str) -> str:
    """A properties file: Canal's defaults by section, then ``changes`` (a key in both is read from the last).

    Written in ISO-8859-1 with ``\\uXXXX`` escapes, as ``java.util.Properties`` reads it.
    """
    lines = [f"# {what}: Canal 1.1.7's defaults, then the keys this setup changes (the later line wins)"]
    for section, keys in defaults:
        lines.append(f"\n# -- {section}")
        lines.extend(_line(key, value) for key, value in keys)
    lines.append("\n# -- changed here")
    lines.extend(_line(key, value) for key, value in changes.items())
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    """Write a rendered file readable by its owner only (it holds the database password)."""
    path.write_text(text, encoding="latin-1")
    path.chmod(0o600)


def _line(key: str, value: str) -> str:
    return f"{_escape(key, key=True)} = {_escape(value)}" if value else f"{_escape(key, key=True)} ="


def _escape(text: str, *, key: bool = False) -> str:
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char in "=: #!" and key:
            out.append("\\" + char)
        elif ord(char) > 0x7E or ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)
