"""Dump the message and enum shapes of Canal's two schema files as JSON.

Run as a script in a subprocess, so that it can load either our generated
modules or canal-python's (which need the pure-Python protobuf backend and
would clash with ours in one descriptor pool).

    python describe.py ours|canal-python
"""

from __future__ import annotations

import json
import sys


def describe_file(file_descriptor) -> dict:
    messages = {}
    for message in file_descriptor.message_types_by_name.values():
        messages[message.name] = {
            field.name: {
                "number": field.number,
                "type": field.type,
                "label": 3 if field.is_repeated else 1,
                "type_name": (field.message_type or field.enum_type).full_name
                if (field.message_type or field.enum_type)
                else None,
                "oneof": field.containing_oneof.name if field.containing_oneof else None,
            }
            for field in message.fields
        }
    enums = {
        enum.name: {value.name: value.number for value in enum.values}
        for enum in file_descriptor.enum_types_by_name.values()
    }
    return {"package": file_descriptor.package, "messages": messages, "enums": enums}


def main(which: str) -> None:
    if which == "ours":
        from canalbridge.protocol import CanalProtocol_pb2, EntryProtocol_pb2
    else:
        from canal.protocol import CanalProtocol_pb2, EntryProtocol_pb2
    print(
        json.dumps(
            {
                "CanalProtocol": describe_file(CanalProtocol_pb2.DESCRIPTOR),
                "EntryProtocol": describe_file(EntryProtocol_pb2.DESCRIPTOR),
            },
            sort_keys=True,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
