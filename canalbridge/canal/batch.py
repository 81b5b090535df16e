"""What one ``getWithoutAck`` returns, and how a ``Messages`` body becomes one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

EMPTY_BATCH_ID = -1  # Canal's id for "no data": never acked, never rolled back


@dataclass(frozen=True)
class CanalBatch:
    """A batch of entries under one batch id, as the server handed it out.

    ``entries`` is read-only: parsed from a GET's reply, it is protobuf's
    own container, whose Entry objects exist only while someone reads them
    (a tuple of them would keep thousands of objects alive for the garbage
    collector to walk while the batch waits to be routed). ``raw_size`` is
    the size of the batch's serialized entries, a few bytes of framing each
    included (the ``Messages`` body), the figure the commit thresholds
    (``min_bytes``/``max_bytes``) are measured in.
    """

    batch_id: int
    entries: Sequence[entry_pb.Entry]
    raw_size: int

    @property
    def is_empty(self) -> bool:
        return self.batch_id == EMPTY_BATCH_ID or not self.entries


def _entry_batch_class() -> type[Message]:
    """A message read from the same bytes as Canal's ``Messages``, with its entries as ``Entry``s.

    ``Messages`` declares its entries ``repeated bytes messages = 2``; a
    repeated embedded message of the same number has the same wire form, so
    one parse (in protobuf's C runtime) reads the batch id and every Entry,
    where parsing the bytes one by one costs about 1.5 µs of Python per entry.
    """
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="canalbridge/entry_batch.proto", package="canalbridge.view",
                                              syntax="proto3", dependency=[entry_pb.DESCRIPTOR.name])
    message = file.message_type.add(name="EntryBatch")
    message.field.add(name="batch_id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    message.field.add(name="entries", number=2, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                      type_name=f".{entry_pb.Entry.DESCRIPTOR.full_name}")
    pool = descriptor_pool.Default()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("canalbridge.view.EntryBatch"))


_EntryBatch = _entry_batch_class()


def parse_messages(body: bytes) -> CanalBatch:
    """A ``Messages`` body (a GET's reply) as a batch; ``DecodeError`` if it or an entry does not parse."""
    parsed: Any = _EntryBatch.FromString(body)  # a dynamic class: no typed fields
    if parsed.batch_id == EMPTY_BATCH_ID:
        return CanalBatch(EMPTY_BATCH_ID, (), 0)
    return CanalBatch(parsed.batch_id, parsed.entries, len(body))
