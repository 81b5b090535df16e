"""Typed errors of the sync core, each carrying where it happened."""

from __future__ import annotations

from canalbridge.sync.position import EntryPosition


class SyncError(Exception):
    """Base class of sync-core failures."""

    #: whether retrying the same data can succeed (a lost connection, a failed
    #: write) or cannot (a row that does not fit its table)
    transient = True


class RowMappingError(SyncError):
    """A row that does not fit its target: names the table, the counts and the binlog position."""

    transient = False

    def __init__(self, table: str, message: str, position: EntryPosition | None) -> None:
        self.table = table
        self.position = position
        where = f" at binlog position {position}" if position else ""
        super().__init__(f"table {table}{where}: {message}")


class EntryDecodeError(RowMappingError):
    """A ROWDATA entry whose storeValue does not parse as a RowChange."""


class ChannelCommitError(SyncError):
    """A channel could not send or commit its part of a transaction."""

    def __init__(self, channel: str, label: str, cause: BaseException) -> None:
        self.channel = channel
        self.label = label
        self.cause = cause
        self.transient = getattr(cause, "transient", True)
        super().__init__(f"channel {channel} transaction {label}: {cause}")


class ReceiverGaveUp(SyncError):
    """The receiver could not reach Canal within its reconnect attempts."""

    def __init__(self, address: str, attempts: int, cause: BaseException) -> None:
        self.address = address
        self.attempts = attempts
        self.cause = cause
        super().__init__(f"canal {address}: gave up after {attempts} connection attempts: {cause}")
