"""Protobuf ids as the watch will read them: .proto text with a reference compiled at run
time, the message Confluent's indexes name (nested too), which values are ids, presence, and
the reasons for records that yield none (wrong indexes, cut short, malformed)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google.protobuf import message_factory
from google.protobuf.message import Message

from dgm.contracts import registry_framing as framing
from dgm.contracts.protobuf_ids import ProtobufDecoder, protobuf_decoder
from dgm.contracts.protobuf_schemas import ROOT_FILE, compile_schema, message_name
from dgm.contracts.registered_schemas import RegisteredSchema

COMMON = RegisteredSchema(
    20,
    "PROTOBUF",
    'syntax = "proto3";\npackage shop.common;\nmessage Ref { string id = 1; int64 seq = 2; }\n',
)
ORDER = RegisteredSchema(
    21,
    "PROTOBUF",
    """
syntax = "proto3";
package shop;
import "shop/common.proto";
import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  int64 seq = 2;
  shop.common.Ref ref = 3;
  oneof key { string code = 4; uint64 number = 5; }
  optional string note = 6;
  bytes raw = 7;
  sint32 delta = 8;
  fixed64 wide = 9;
  bool flag = 10;
  double ratio = 11;
  Kind kind = 12;
  repeated string tags = 13;
  map<string, string> attrs = 14;
  google.protobuf.Timestamp at = 15;
  optional int32 small = 16;
  enum Kind { A = 0; B = 1; }
  message Line { string id = 1; }
}

message Other { int32 id = 1; }
""",
    references=(COMMON,),
    reference_names=("shop/common.proto",),
)
PROTO2 = RegisteredSchema(
    22, "PROTOBUF", 'syntax = "proto2";\nmessage P { optional int64 id = 1; }\n'
)


def classes(schema: RegisteredSchema) -> tuple[ProtobufDecoder, dict[str, type[Message]]]:
    decoder = protobuf_decoder(schema)
    assert isinstance(decoder, ProtobufDecoder)
    names = ("shop.Order", "shop.Other", "shop.Order.Line", "P")
    found = {}
    for name in names:
        try:
            descriptor = decoder.pool.FindMessageTypeByName(name)
        except KeyError:
            continue
        found[name] = message_factory.GetMessageClass(descriptor)
    return decoder, found


def test_the_schema_compiles_with_its_reference_and_well_known_types() -> None:
    compiled = compile_schema(ORDER)
    names = [f.name for f in compiled.files.file]
    assert names[-1] == ROOT_FILE and "shop/common.proto" in names
    assert "google/protobuf/timestamp.proto" in names
    assert message_name(compiled, (0,)) == "shop.Order"
    assert message_name(compiled, (1,)) == "shop.Other"
    # A map's entry is a nested type too (protoc writes it where the map is declared), and
    # Confluent's serializers count it: Line is the second nested type.
    assert message_name(compiled, (0, 0)) == "shop.Order.AttrsEntry"
    assert message_name(compiled, (0, 1)) == "shop.Order.Line"
    assert message_name(compiled, (2,)) is None
    assert message_name(compiled, (0, 2)) is None


def test_a_schema_registered_as_a_descriptor_compiles() -> None:
    # confluent-kafka's Python serializer registers a base64 FileDescriptorProto; a registry
    # may hand it back as it is, its references .proto source or descriptors alike.
    own = compile_schema(ORDER).root
    own.name = "shop/order.proto"
    described = RegisteredSchema(
        23,
        "PROTOBUF",
        base64.b64encode(own.SerializeToString()).decode(),
        references=ORDER.references,
        reference_names=ORDER.reference_names,
    )
    decoder, found = classes(described)
    value = found["shop.Order"](ref={"id": "r-1"}).SerializeToString()
    assert decoder.find(b"\x00" + value, "ref.id") == ("r-1", None)
    broken = RegisteredSchema(24, "PROTOBUF", "AAAA/wD=")
    assert protobuf_decoder(broken) == framing.SCHEMA_UNREADABLE


@pytest.mark.parametrize(
    "schema",
    [
        RegisteredSchema(30, "PROTOBUF", "syntax = 'proto3'; message {"),
        RegisteredSchema(31, "PROTOBUF", 'syntax = "proto3"; import "absent.proto";'),
        RegisteredSchema(32, "PROTOBUF", 'syntax = "proto3"; import "../x.proto";',
                         (COMMON,), ("../x.proto",)),
    ],
)  # fmt: skip
def test_a_schema_that_does_not_compile_is_unreadable(schema: RegisteredSchema) -> None:
    assert protobuf_decoder(schema) == framing.SCHEMA_UNREADABLE


def order(**fields: Any) -> bytes:
    _, found = classes(ORDER)
    return bytes(found["shop.Order"](**fields).SerializeToString())


@pytest.mark.parametrize(
    ("path", "fields", "wanted"),
    [
        ("id", {"id": "o-1"}, ("o-1", None)),
        ("id", {}, ("", None)),  # proto3 without presence: unset is "", the empty id
        ("seq", {"seq": -(2**63)}, (str(-(2**63)), None)),
        ("seq", {}, (None, framing.FIELD_MISSING)),  # unset and 0 are one
        ("ref.id", {"ref": {"id": "r-1"}}, ("r-1", None)),
        ("ref.id", {}, (None, framing.FIELD_MISSING)),  # an unset message
        ("ref.seq", {"ref": {"seq": 7}}, ("7", None)),
        ("code", {"code": "c-1"}, ("c-1", None)),
        ("code", {"number": 5}, (None, framing.FIELD_MISSING)),  # the other oneof member
        ("number", {"number": 2**64 - 1}, (str(2**64 - 1), None)),
        ("note", {}, (None, framing.FIELD_MISSING)),
        ("note", {"note": ""}, ("", None)),  # set, and empty
        ("small", {"small": 0}, ("0", None)),  # explicit presence: a 0 that is set
        ("raw", {"raw": b"\xff\x00"}, ("0xFF00", None)),
        ("raw", {"raw": "é".encode()}, ("é", None)),
        ("delta", {"delta": -3}, ("-3", None)),
        ("wide", {"wide": 2**63}, (str(2**63), None)),
        ("flag", {"flag": True}, (None, framing.NOT_AN_ID)),
        ("ratio", {"ratio": 1.0}, (None, framing.NOT_AN_ID)),
        ("kind", {"kind": 1}, (None, framing.NOT_AN_ID)),
        ("tags", {"tags": ["a"]}, (None, framing.NOT_AN_ID)),
        ("attrs", {"attrs": {"k": "v"}}, (None, framing.NOT_AN_ID)),
        ("attrs.k", {"attrs": {"k": "v"}}, (None, framing.NOT_AN_ID)),
        ("ref", {"ref": {"id": "r"}}, (None, framing.NOT_AN_ID)),
        ("at", {}, (None, framing.FIELD_MISSING)),
        ("id.x", {"id": "o"}, (None, framing.NOT_AN_ID)),
        ("nope", {"id": "o"}, (None, framing.FIELD_MISSING)),
    ],
)
def test_which_protobuf_values_are_ids(
    path: str, fields: dict[str, Any], wanted: tuple[str | None, str | None]
) -> None:
    decoder, _ = classes(ORDER)
    assert decoder.find(b"\x00" + order(**fields), path) == wanted


def test_the_indexes_pick_the_message() -> None:
    decoder, found = classes(ORDER)
    other = found["shop.Other"](id=4).SerializeToString()
    line = found["shop.Order.Line"](id="l-1").SerializeToString()
    # Confluent's indexes: a zigzag count, then zigzag indexes; a single 0 is [0].
    assert decoder.find(b"\x02\x02" + other, "id") == ("4", None)
    assert decoder.find(b"\x04\x00\x02" + line, "id") == ("l-1", None)
    assert decoder.find(b"\x02\x00" + order(id="o"), "id") == ("o", None)  # [0] written long
    assert decoder.find(b"\x02\x04" + other, "id") == (None, framing.NOT_FRAMED)  # no [2]
    assert decoder.find(b"\x04\x00\x04" + line, "id") == (None, framing.NOT_FRAMED)
    assert decoder.find(b"", "id") == (None, framing.NOT_FRAMED)  # no indexes at all
    assert decoder.find(b"\x04\x00", "id") == (None, framing.NOT_FRAMED)  # cut short
    assert decoder.find(b"\x01", "id") == (None, framing.NOT_FRAMED)  # a negative count


def test_a_malformed_payload_is_unreadable() -> None:
    decoder, _ = classes(ORDER)
    whole = order(id="o-1", ref={"id": "r-1"}, note="n")
    assert decoder.find(b"\x00" + whole[:-1], "id") == (None, framing.PAYLOAD_UNREADABLE)
    bad_utf8 = b"\x0a\x02\xff\xfe"  # field 1, a proto3 string of invalid UTF-8
    assert decoder.find(b"\x00" + bad_utf8, "seq") == (None, framing.PAYLOAD_UNREADABLE)
    assert decoder.find(b"\x00\x0f", "id") == (None, framing.PAYLOAD_UNREADABLE)  # wire type 7
    # An empty message is a valid one: every field unset.
    assert decoder.find(b"\x00", "id") == ("", None)


def test_proto2_fields_have_presence() -> None:
    decoder, found = classes(PROTO2)
    assert decoder.find(b"\x00" + found["P"](id=0).SerializeToString(), "id") == ("0", None)
    assert decoder.find(b"\x00", "id") == (None, framing.FIELD_MISSING)
