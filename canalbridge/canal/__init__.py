"""The Canal client: connector, batches and typed errors."""

from canalbridge.canal.batch import EMPTY_BATCH_ID, CanalBatch
from canalbridge.canal.connector import CanalConnector
from canalbridge.canal.errors import (
    CanalAuthError,
    CanalConnectionError,
    CanalError,
    CanalProtocolError,
    CanalServerError,
)

__all__ = [
    "EMPTY_BATCH_ID",
    "CanalAuthError",
    "CanalBatch",
    "CanalConnectionError",
    "CanalConnector",
    "CanalError",
    "CanalProtocolError",
    "CanalServerError",
]
