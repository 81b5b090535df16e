"""The source database, read directly for a snapshot: its tables' keys, key-range chunks and signal rows.

Canal reads the binlog; a snapshot reads the tables themselves, over a
plain MySQL connection (PyMySQL) of the user's snapshot settings. The one
thing written to the source is a signal row (:mod:`canalbridge.source_db.signals`).
"""

from canalbridge.source_db.chunks import KeyColumn, KeyRange, KeyValues, chunk_predicate
from canalbridge.source_db.connection import SourceDb
from canalbridge.source_db.errors import (
    SignalTableError,
    SourceDbAccessError,
    SourceDbAuthError,
    SourceDbConnectionError,
    SourceDbError,
    SourceDbTlsError,
    TableKeyError,
)
from canalbridge.source_db.filters import FilterError, check_filter, checked_filter
from canalbridge.source_db.keys import TableKey, table_columns, table_key, table_rows_estimate
from canalbridge.source_db.planner import ChunkPlanner
from canalbridge.source_db.signals import CLOSE, OPEN, Signal, SignalTable
from canalbridge.source_db.tls import TLS_MODES, SourceTls

__all__ = [
    "CLOSE",
    "OPEN",
    "TLS_MODES",
    "ChunkPlanner",
    "FilterError",
    "KeyColumn",
    "KeyRange",
    "KeyValues",
    "Signal",
    "SignalTable",
    "SignalTableError",
    "SourceDb",
    "SourceDbAccessError",
    "SourceDbAuthError",
    "SourceDbConnectionError",
    "SourceDbError",
    "SourceDbTlsError",
    "SourceTls",
    "TableKey",
    "TableKeyError",
    "check_filter",
    "checked_filter",
    "chunk_predicate",
    "table_columns",
    "table_key",
    "table_rows_estimate",
]
