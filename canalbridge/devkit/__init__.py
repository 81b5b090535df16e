"""The dev kit: not part of the product, which never imports it (tests/unit/test_layers.py).

A Canal-protocol dev server with fault injection (not a binlog parser), the
workload generator and Canal value rendering, an in-memory channel writer,
the table verifier and the demo. Tests, benchmarks and the CLI's ``demo`` and
``devserver`` commands use it.
"""

from canalbridge.devkit.destination import DestinationConfig
from canalbridge.devkit.server import DevServer
from canalbridge.devkit.store import BatchMode, EventStore, StoredEvent

__all__ = [
    "BatchMode",
    "DestinationConfig",
    "DevServer",
    "EventStore",
    "StoredEvent",
]
