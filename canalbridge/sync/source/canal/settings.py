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


    host: str = setting(doc="the Canal server's host", check=non_empty)
    port: int = setting(doc="the Canal server's port (`canal.port`)", check=port)
    destination: str = setting(doc="the Canal destination (instance) to read; one job per host:port and "
                                   "destination", check=non_empty)
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

    KIND: ClassVar[str] = "canal"
    SECTION: ClassVar[str] = f"job.{KIND}"
    READS: ClassVar[str] = "Canal over TCP"
    DISCOVERS_RULE_TABLES: ClassVar[bool] = True

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def fetch_size(self, commit: CommitSettings) -> int:
        """How much one get asks of Canal: ``batch_size``, but at most a quarter of its store (in the store's
        unit, entries or memunits), so that no single batch can fill the store in the middle of a transaction
        and force a split."""
        return max(1, min(self.batch_size, commit.store_share))

    def reads(self, position: Position) -> bool:
        return isinstance(position, EntryPosition)

    @property
    def identity(self) -> tuple[object, ...]:
        return ("canal", self.host, self.port, self.destination)

    def already_read(self, by: str) -> str:
        return (f"{self.address} destination {self.destination!r} is already read by {by}; Canal keeps one ack "
                "cursor per destination")

    def public(self, mask: str) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "destination": self.destination, "username": self.username,
                "password": mask if self.password or self.password_env else "", "client_id": self.client_id,
                "batch_size": self.batch_size, "debug": self.debug}

    def transactions(self) -> str:
        return "kept whole (a commit waits for the transaction's end, see max_source_txn_wait_seconds)"
