"""The settings of a job that reads a Canal server's destination over Canal's TCP protocol (``[job.canal]``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from canalbridge.sync.model.position import EntryPosition, Position
from canalbridge.sync.options import java_short, non_empty, port, positive, setting
from canalbridge.sync.settings import CommitSettings


@dataclass(frozen=True)
class CanalSettings:
    """Where the job reads from: a Canal server's destination over its TCP protocol (Doris's canal.* job
    properties). Canal's store settings, which decide when commits are cut, are kept in :class:`CommitSettings`."""


    host: str = setting(doc="the Canal server's host; not with `zk_servers`", check=non_empty, required=False,
                        default_text="(none: with `zk_servers`, ZooKeeper names the server)")
    port: int = setting(doc="the Canal server's port (`canal.port`); not with `zk_servers`", check=port,
                        required=False, default_text="(none: with `zk_servers`, ZooKeeper names the server)")
    destination: str = setting(doc="the Canal destination (instance) to read; one job per Canal server (or "
                                   "cluster) and destination", check=non_empty)
    username: str = setting("", doc="Canal's `canal.user`")
    password: str = setting("", doc="Canal's password (`canal.passwd` holds its SHA1(SHA1)); prefer "
                                    "`password_env`", secret=True)
    # The variable's name (no secret): the loader reads the password from it.
    password_env: str | None = setting(None, check=non_empty, secret=True,  # (hidden in errors: a password typed here)
                                       doc="the environment variable that holds the password, instead of `password`")
    client_id: str = setting("1001", doc="the Canal client id (a Java short)", check=java_short)
    batch_size: int = setting(8192, check=positive,
                              doc="a getWithoutAck's size (Doris `canal.batchSize`): entries in `ITEMSIZE` mode, KB "
                                  "in `MEMSIZE` mode; at most a quarter of `store_capacity` is asked for (in `MEMSIZE` "
                                  "mode, and no more KB than a quarter of its slots take at the last batch's entry "
                                  "size), so that no get can fill Canal's store in the middle of a transaction")
    poll_timeout_ms: int = setting(1000, doc="how long a get may wait on the server for a full batch",
                                   check=positive)
    debug: bool = setting(False, doc="log a summary of every batch and every row (Doris's `printSummary`)")
    zk_servers: str | None = setting(None, check=non_empty,
                                     doc="the ZooKeeper servers of a Canal HA cluster (its `canal.zkServers`, "
                                         "`host:port,host:port`), instead of `host` and `port`: the job reads the "
                                         "destination from the server running it and follows a failover")

    KIND: ClassVar[str] = "canal"
    SECTION: ClassVar[str] = f"job.{KIND}"
    READS: ClassVar[str] = "Canal over TCP"
    DISCOVERS_RULE_TABLES: ClassVar[bool] = True

    @property
    def address(self) -> str:
        """Where the job reads, as logs and errors name it."""
        return f"zookeeper {self.zk_servers}" if self.zk_servers else f"{self.host}:{self.port}"

    def fetch_size(self, commit: CommitSettings) -> int:
        """How much one get asks of Canal: ``batch_size``, but at most a quarter of its store (in the store's
        unit, entries or memunits), so that no single batch can fill the store in the middle of a transaction
        and force a split."""
        return max(1, min(self.batch_size, commit.store_share))

    def reads(self, position: Position) -> bool:
        return isinstance(position, EntryPosition)

    @property
    def identity(self) -> tuple[object, ...]:
        return ("canal", self.zk_servers or self.host, None if self.zk_servers else self.port, self.destination)

    def already_read(self, by: str) -> str:
        return (f"{self.address} destination {self.destination!r} is already read by {by}; Canal keeps one ack "
                "cursor per destination")

    def public(self, mask: str) -> dict[str, Any]:
        where: dict[str, Any] = ({"zk_servers": self.zk_servers} if self.zk_servers
                                 else {"host": self.host, "port": self.port})
        return {**where, "destination": self.destination, "username": self.username,
                "password": mask if self.password or self.password_env else "", "client_id": self.client_id,
                "batch_size": self.batch_size, "debug": self.debug}

    def transactions(self) -> str:
        return "kept whole (a commit waits for the transaction's end, see max_source_txn_wait_seconds)"
