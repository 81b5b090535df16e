"""Canal's protobuf messages, generated from ``proto/`` by ``make proto``.

Import from here rather than from the ``*_pb2`` modules, so that the rest of
the code names the messages once::

    from canalbridge.protocol import CanalProtocol_pb2 as packet_pb
    from canalbridge.protocol import EntryProtocol_pb2 as entry_pb
"""

from canalbridge.protocol import CanalProtocol_pb2, EntryProtocol_pb2

__all__ = ["CanalProtocol_pb2", "EntryProtocol_pb2"]
