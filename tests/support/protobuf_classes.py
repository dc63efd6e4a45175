"""Protobuf message classes for the tests' producers, generated at test time as the lab's are
(lab/registry_relay/protobuf_orders.py: compiled by grpcio-tools' protoc, classes made from
the descriptors, as a producer's build would), for confluent-kafka's ProtobufSerializer."""

from __future__ import annotations

from typing import Any

from lab.registry_relay.protobuf_orders import message_classes as compiled_classes

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


def message_classes() -> dict[str, Any]:
    """dgm.test.Order and dgm.test.Order.Line, by full name."""
    names = ("dgm.test.Order", "dgm.test.Order.Line")
    return dict(compiled_classes(FILES, "dgm/test/order.proto", names))
