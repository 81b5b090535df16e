"""The settings of a job that reads Canal's Kafka topic (``[job.kafka]``), and the security keys kafka-python
takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from canalbridge.sync.model.position import KafkaPosition, Position
from canalbridge.sync.options import Option, non_empty, one_of, positive, setting


def _bootstrap(value: str | list) -> str | None:
    servers = value.split(",") if isinstance(value, str) else value
    if not servers or not all(isinstance(s, str) and s.strip().rpartition(":")[2].isdigit() for s in servers):
        return f"must be host:port, or a list of them, got {value!r}"
    return None


@dataclass(frozen=True)
class KafkaSettings:
    """Where a job reads Canal's Kafka topic (``canal.serverMode = kafka``), as kafka-python takes it, instead of
    ``[job.canal]``.

    ``record_format`` is Canal's ``canal.mq.flatMessage``: "flat" (true, its
    default) or "protobuf". ``transaction_markers``: whether the records carry
    transaction ends, which lets commits keep source transactions whole; only
    protobuf records on one partition do (Canal drops them when it hashes
    partitions, and flat messages never have them). ``security`` goes to
    kafka-python's consumer as given (``security_protocol``, ``sasl_*``,
    ``ssl_*``); it is never logged or shown.
    """


    bootstrap_servers: tuple[str, ...] = setting(
        doc='the brokers, as `"h:p,h:p"` or a list', kinds=(str, list), check=_bootstrap)
    topic: str = setting(doc="Canal's topic (`canal.mq.topic`)", check=non_empty)
    group_id: str = setting(doc="the consumer group that holds the committed offsets; one job per topic and group",
                            check=non_empty, required=False, default_text="`canalbridge-<job name>`")
    client_id: str = setting("canalbridge", doc="kafka-python's client id", check=non_empty)
    record_format: str = setting("flat", name="format", check=one_of("flat", "protobuf"),
                                 doc="Canal's `canal.mq.flatMessage`: `flat` (true, Canal's default) or `protobuf` "
                                     "(false)")
    transaction_markers: bool = setting(
        False, default_text="true for `protobuf`, false for `flat`",
        doc="whether the records carry transaction ends (protobuf on a topic Canal does not hash); false for "
            "hashed topics; flat messages have none")
    start_from: str = setting("earliest", check=one_of("earliest", "latest"),
                              doc="where a partition starts when neither the group nor any target holds an offset "
                                  "for it")
    poll_timeout_ms: int = setting(1000, doc="how long one poll may wait", check=positive)
    max_poll_records: int = setting(500, doc="records one poll takes at most", check=positive)
    # One bootstrap, offset request or offset commit; past it the link reconnects (with back-off).
    request_timeout_ms: int = setting(10_000, check=positive,
                                      doc="a bootstrap, offset request or offset commit; past it the job reconnects "
                                          "with back-off")
    security: Mapping[str, object] = setting(
        {}, secret=True, doc="kafka-python's security settings: the `[job.kafka.security]` table below")
    debug: bool = setting(False, doc="log every poll's summary and every row")

    KIND: ClassVar[str] = "kafka"
    SECTION: ClassVar[str] = f"job.{KIND}"
    READS: ClassVar[str] = "Kafka"
    # A snapshot runner at every start would refuse the topics of several partitions that rules stream from.
    DISCOVERS_RULE_TABLES: ClassVar[bool] = False

    @property
    def address(self) -> str:
        return ",".join(self.bootstrap_servers)

    def reads(self, position: Position) -> bool:
        return isinstance(position, KafkaPosition)

    @property
    def identity(self) -> tuple[object, ...]:
        return ("kafka", frozenset(self.bootstrap_servers), self.topic, self.group_id)

    def already_read(self, by: str) -> str:
        return (f"topic {self.topic!r} with group {self.group_id!r} is already read by {by}; the group keeps one "
                "committed offset per partition")

    def public(self, mask: str) -> dict[str, Any]:
        return {"bootstrap_servers": list(self.bootstrap_servers), "topic": self.topic, "group_id": self.group_id,
                "client_id": self.client_id, "format": self.record_format,
                "transaction_markers": self.transaction_markers, "start_from": self.start_from, "debug": self.debug,
                "security": {key: mask if "password" in key else value for key, value in self.security.items()}}

    def transactions(self) -> str:
        if self.transaction_markers:
            return "kept whole: the protobuf records carry transaction ends (one partition, no partitionHash)"
        why = ("flat messages carry no transaction ends" if self.record_format == "flat"
               else "transaction_markers = false (Canal drops transaction ends when it hashes partitions)")
        return f"not kept whole: {why}; a commit may end inside a source transaction"

    @property
    def description(self) -> str:
        """How logs and errors name this source (never with credentials)."""
        return f"kafka {self.address} topic {self.topic}"


# kafka-python's consumer settings a job may pass, by kafka-python's names; a *_password may come from *_password_env.
KAFKA_SECURITY = tuple(Option("job.kafka.security", name, kinds, check=check, doc=doc, secret="password" in name)
                       for name, kinds, check, doc in (
    ("security_protocol", (str,), one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "how to reach the brokers"),
    ("sasl_mechanism", (str,), one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"),
     "the SASL mechanism"),
    ("sasl_plain_username", (str,), None, "the SASL user"),
    ("sasl_plain_password", (str,), None, "the SASL password; prefer `sasl_plain_password_env`"),
    ("sasl_plain_password_env", (str,), non_empty, "the environment variable that holds the SASL password"),
    ("sasl_kerberos_service_name", (str,), non_empty, "Kerberos service name"),
    ("sasl_kerberos_domain_name", (str,), non_empty, "Kerberos domain name"),
    ("ssl_cafile", (str,), non_empty, "CA certificate file"),
    ("ssl_certfile", (str,), non_empty, "client certificate file"),
    ("ssl_keyfile", (str,), non_empty, "client key file"),
    ("ssl_password", (str,), None, "the client key's password; prefer `ssl_password_env`"),
    ("ssl_password_env", (str,), non_empty, "the environment variable that holds the client key's password"),
    ("ssl_crlfile", (str,), non_empty, "certificate revocation list file"),
    ("ssl_check_hostname", (bool,), None, "check the broker's host name against its certificate"),
    ("ssl_ciphers", (str,), non_empty, "allowed ciphers, OpenSSL's syntax"),
))
