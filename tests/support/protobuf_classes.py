"""Protobuf message classes for the tests' producers, generated at test time: .proto files
written to a folder, compiled by grpcio-tools' protoc, classes made from the descriptors (as
a producer's build would generate them), for confluent-kafka's ProtobufSerializer."""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

COMMON = 'syntax = "proto3";\npackage dgm.test.common;\nmessage Ref { string id = 1; }\n'
ORDER = """syntax = "proto3";
package dgm.test;
import "dgm/test/common.proto";
message Order {
  dgm.test.common.Ref order = 1;
  int64 amount = 2;
  message Line { string id = 1; }
}
"""
# Order's .proto imports common.proto: the serializer registers it as a reference.
FILES = {"dgm/test/common.proto": COMMON, "dgm/test/order.proto": ORDER}


def message_classes(folder: Path) -> dict[str, Any]:
    """dgm.test.Order and dgm.test.Order.Line, by full name."""
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    out = folder / "set.pb"
    include = importlib.resources.files("grpc_tools") / "_proto"
    status = protoc.main([
        "protoc", f"-I{folder}", f"-I{include}", f"--descriptor_set_out={out}",
        "--include_imports", str(folder / "dgm/test/order.proto"),
    ])  # fmt: skip
    assert status == 0, "protoc refused the test's .proto files"
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
        for name in ("dgm.test.Order", "dgm.test.Order.Line")
    }
