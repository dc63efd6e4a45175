"""The relay's order messages in Protobuf, as a producer's build would generate them: the
.proto of each version compiled by grpcio-tools' protoc, the classes made from its
descriptors, for confluent-kafka's ProtobufSerializer and ProtobufDeserializer. v2 adds
`region`; each version lives in its own pool, as two builds would."""

from __future__ import annotations

import functools
import importlib.resources
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

FILE = "lab/orders.proto"


def proto(version: int) -> str:
    # `optional`: a reader of v2 tells a v1 record (no region) from a region of "".
    region = "  optional string region = 4;\n" if version == 2 else ""
    return (
        'syntax = "proto3";\npackage lab.orders;\nmessage Order {\n'
        "  string order_id = 1;\n  double amount = 2;\n  optional string note = 3;\n"
        f"{region}}}\n"
    )


@functools.cache
def order_class(version: int) -> type[Message]:
    """lab.orders.Order of `version`."""
    return message_classes({FILE: proto(version)}, FILE, ("lab.orders.Order",))["lab.orders.Order"]


def message_classes(
    files: Mapping[str, str], target: str, names: Sequence[str]
) -> dict[str, type[Message]]:
    """The classes of message `names` (full names) from .proto `files` (import name -> text):
    `target` and its imports compiled by protoc, in a pool of their own."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory(prefix="lab-proto-") as folder:
        for name, text in files.items():
            (Path(folder) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / name).write_text(text, encoding="utf-8")
        out = Path(folder) / "set.pb"
        include = importlib.resources.files("grpc_tools") / "_proto"
        status = protoc.main([
            "protoc", f"-I{folder}", f"-I{include}", f"--descriptor_set_out={out}",
            "--include_imports", str(Path(folder) / target),
        ])  # fmt: skip
        if status != 0:
            raise RuntimeError(f"protoc refused {target}")
        described = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in described.file:  # imports first
        pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name)) for name in names
    }


def to_message(record: dict[str, Any], version: int) -> Message:
    """A record of schemas.order / schemas.enriched as an Order (an unset note stays unset)."""
    return order_class(version)(**{k: v for k, v in record.items() if v is not None})


def to_record(message: Any) -> dict[str, Any]:
    """An Order read back as the relay's record (a region only where one was written)."""
    note = message.note if message.HasField("note") else None
    record = {"order_id": message.order_id, "amount": message.amount, "note": note}
    if "region" in message.DESCRIPTOR.fields_by_name and message.HasField("region"):
        record["region"] = message.region
    return record
