"""A Canal-protocol server for tests, benchmarks and the demo (not a binlog parser)."""

from canalbridge.devserver.destination import DestinationConfig
from canalbridge.devserver.server import AckCursor, DevServer
from canalbridge.devserver.store import BatchMode, EventStore, LogPosition, StoredEvent

__all__ = [
    "AckCursor",
    "BatchMode",
    "DestinationConfig",
    "DevServer",
    "EventStore",
    "LogPosition",
    "StoredEvent",
]
