"""A copy's value as the duplicate story shows it (dgm/contracts/record_view.py): decoded by
its writer schema when framed for a registry, else JSON, text or bytes; every failure said."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from dgm.contracts.record_view import value_view
from dgm.contracts.registered_schemas import IdKind, RegisteredSchema, SchemaLookupError

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "customer", "type": "lab.Customer"},  # a named type another schema defines
    ],
}
CUSTOMER = {"type": "record", "name": "Customer", "namespace": "lab", "fields": [
    {"name": "name", "type": ["null", "string"]}]}  # fmt: skip


class Registered:
    """Schemas by id, as a registry answers them (a real one is tests/dgm/clients')."""

    def __init__(self, schemas: dict[tuple[int, IdKind], RegisteredSchema]) -> None:
        self.schemas = schemas

    def schema(self, schema_id: int, id_kind: IdKind = "content") -> RegisteredSchema:
        try:
            return self.schemas[(schema_id, id_kind)]
        except KeyError:
            raise SchemaLookupError("not found", f"no schema {schema_id}") from None


PROTO = (
    'syntax = "proto3";\npackage lab;\n'
    "message Order { string order_id = 1; int64 cents = 2; message Line { string sku = 1; } }\n"
)
REFERENCE = RegisteredSchema(3, "AVRO", json.dumps(CUSTOMER))
LOOKUP = Registered(
    {
        (7, "content"): RegisteredSchema(
            7, "AVRO", json.dumps(ORDER), (REFERENCE,), ("lab.Customer",)
        ),
        (9, "global"): RegisteredSchema(9, "JSON", '{"type": "object"}'),
        (11, "content"): RegisteredSchema(11, "PROTOBUF", PROTO),
    }
)


def avro(record: dict[str, object]) -> bytes:
    named: dict[str, dict[Any, Any]] = {}
    fastavro.parse_schema(CUSTOMER, named_schemas=named)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER, named_schemas=named), record)
    return out.getvalue()


def test_an_avro_copy_reads_as_its_record_by_the_writer_schema_and_its_references() -> None:
    record = {"order_id": "o-1", "amount": 2.5, "customer": {"name": "ada"}}
    view = value_view(b"\x00" + (7).to_bytes(4, "big") + avro(record), None, LOOKUP)
    assert view.read_as == "Avro, schema 7 (confluent framing)" and view.is_json
    assert json.loads(view.text) == record


def test_a_json_schema_copy_in_apicurio_header_mode_reads_as_its_json() -> None:
    headers = [("apicurio.value.globalId", (9).to_bytes(8, "big"))]
    view = value_view(b'{"order_id": "o-2"}', headers, LOOKUP)
    assert view.read_as == "JSON Schema, schema 9 (apicurio-header framing)"
    assert json.loads(view.text) == {"order_id": "o-2"}


def test_a_protobuf_copy_reads_as_the_message_its_indexes_name() -> None:
    framed = b"\x00" + (11).to_bytes(4, "big")
    # Indexes [0] (one 0 byte), then order_id "o-3" and cents 2**40 (a varint).
    order = b"\x0a\x03o-3" + b"\x10" + bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x20])
    view = value_view(framed + b"\x00" + order, None, LOOKUP)
    assert view.read_as == "Protobuf lab.Order, schema 11 (confluent framing)" and view.is_json
    assert json.loads(view.text) == {"order_id": "o-3", "cents": str(2**40)}
    # Indexes [0, 0]: count 2 and two zeros, zigzag varints: the nested Line.
    line = value_view(framed + b"\x04\x00\x00" + b"\x0a\x01x", None, LOOKUP)
    assert line.read_as.startswith("Protobuf lab.Order.Line") and json.loads(line.text) == {
        "sku": "x"
    }


def test_what_cannot_be_decoded_says_why() -> None:
    framed = b"\x00" + (7).to_bytes(4, "big")
    protobuf = framed[:1] + (11).to_bytes(4, "big")
    assert (
        "does not decode (payload unreadable)"
        in value_view(
            protobuf + b"\x00\x0a\x09",
            None,
            LOOKUP,  # order_id cut short
        ).read_as
    )
    assert (
        "does not decode (not framed)" in value_view(protobuf + b"\x02\x0e", None, LOOKUP).read_as
    )
    assert "schema not had (not found" in value_view(b"\x00\x00\x00\x00\x05x", None, LOOKUP).read_as
    assert "no [schema_registry] configured" in value_view(framed + b"x", None, None).read_as
    broken = value_view(framed + b"\x02", None, LOOKUP)  # a string cut short
    assert "does not decode" in broken.read_as and broken.text == ""


def test_unframed_values_read_as_json_text_or_bytes() -> None:
    assert value_view(b'{"id": 1}', None, None) == value_view(b'{"id":1}', None, None)
    assert value_view(b'{"id": 1}', None, None).read_as == "JSON"
    assert value_view("héllo".encode(), None, None).text == "héllo"
    raw = value_view(b"\xff\x00" * 200, None, None)
    assert (
        raw.read_as == "bytes (hex)" and raw.text.startswith("ff 00") and "(400 bytes)" in raw.text
    )
    assert value_view(None, None, LOOKUP).read_as == "no value (a tombstone)"
