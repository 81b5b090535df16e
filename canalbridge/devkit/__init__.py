"""The dev kit: not part of the product, which never imports it (tests/unit/test_layers.py).

A Canal-protocol dev server with fault injection (not a binlog parser), the
workload generator and Canal value rendering, the table verifier and the
demo: a local playground that ships with the product, which never imports
it. The CLI's ``demo`` and ``devserver`` commands use it, and so do the
tests and benchmarks; what only they use is in ``tests/infra``, outside the
wheel.
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
