"""The framings of registry records, read without Spark (the Spark twin is held equal to
these in tests/watch/test_registry_ids.py)."""

from __future__ import annotations

import json

import pytest

from dgm.contracts import registry_framing as framing
from dgm.contracts.avro_paths import (
    Branch,
    Field,
    Leaf,
    Missing,
    SchemaUnreadable,
    Union,
    avro_path,
)
from dgm.contracts.registered_schemas import RegisteredSchema
from dgm.contracts.registry_framing import Framed, protobuf_message_indexes, unframe


def test_each_framing_is_told_by_its_bytes_or_header() -> None:
    assert unframe(b"\x00\x00\x00\x01\x00rest", None) == Framed(
        "confluent", "content", 256, b"rest"
    )
    eight = b"\x00" + (7).to_bytes(8, "big")
    assert unframe(eight + b"p", None) == Framed("apicurio", "global", 7, b"p")
    header = [("apicurio.value.globalId", (9).to_bytes(8, "big"))]
    assert unframe(b"\x00anything", header) == Framed(
        "apicurio-header", "global", 9, b"\x00anything"
    )
    content = [("apicurio.value.contentId", (3).to_bytes(8, "big"))]
    assert unframe(b"p", content) == Framed("apicurio-header", "content", 3, b"p")


@pytest.mark.parametrize(
    ("value", "headers", "reason"),
    [
        (None, None, framing.NO_VALUE),
        (b"", None, framing.NOT_FRAMED),
        (b"\x01\x00\x00\x00\x01", None, framing.NOT_FRAMED),  # wrong magic byte
        (b"\x00\x00\x00\x01", None, framing.NOT_FRAMED),  # a byte short
        (b"\x00" + bytes(8), None, framing.NOT_FRAMED),  # id 0
        (b"p", [("apicurio.value.globalId", b"\xff" * 8)], framing.NOT_FRAMED),  # past a long
        (b"p", [("apicurio.value.globalId", b"\x01")], framing.NOT_FRAMED),
        (None, [("apicurio.value.globalId", bytes(8))], framing.NO_VALUE),
    ],
)
def test_a_record_not_framed_says_why(
    value: bytes | None, headers: list[tuple[str, bytes | None]] | None, reason: str
) -> None:
    assert unframe(value, headers) == reason


def test_protobuf_message_indexes() -> None:
    assert protobuf_message_indexes(b"\x00rest") == ((0,), b"rest")  # the first message
    assert protobuf_message_indexes(b"\x04\x02\x04m") == ((1, 2), b"m")
    assert protobuf_message_indexes(b"\x04\x02") is None  # cut short
    assert protobuf_message_indexes(b"\x01") is None  # a negative count


def schema(text: object, *references: RegisteredSchema) -> RegisteredSchema:
    return RegisteredSchema(1, "AVRO", json.dumps(text), references)


def test_a_reference_is_written_out_where_it_is_used() -> None:
    money = RegisteredSchema(2, "AVRO", json.dumps(
        {"type": "record", "name": "Money", "namespace": "m", "fields": [
            {"name": "units", "type": "long"},
        ]}
    ))  # fmt: skip
    order = {"type": "record", "name": "Order", "fields": [
        {"name": "price", "type": "m.Money"}, {"name": "tax", "type": "m.Money"},
    ]}  # fmt: skip
    path = avro_path(schema(order, money), "price.units")
    assert path.node == Field("price", Field("units", Leaf("integer")))
    text = json.loads(path.decoding_text)
    assert text["fields"][0]["type"]["name"] == "m.Money"  # defined at its first use
    assert text["fields"][1]["type"] == "m.Money"


def test_unions_and_logical_types() -> None:
    record = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": ["null", "string", {"type": "enum", "name": "E", "symbols": ["A"]}]},
        {"name": "n", "type": ["null", "int", "long"]},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5}},
    ]}  # fmt: skip
    union = Union((Branch("string", 0, Leaf("text")), Branch("E", 1, Leaf(None))))
    assert avro_path(schema(record), "u").node == Field("u", union)
    assert avro_path(schema(record), "n").node == Field("n", Leaf("integer"))  # one long column
    assert avro_path(schema(record), "t").node == Field("t", Leaf(None))
    assert avro_path(schema(record), "x").node == Missing()
    decimal = avro_path(schema(record), "d")
    assert decimal.node == Field("d", Leaf("decimal", 5))
    kept = [f["type"] for f in json.loads(decimal.decoding_text)["fields"]]
    assert kept[2] == {"type": "long"} and kept[3]["logicalType"] == "decimal"


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "x", "type": "Nowhere"}]}',
    ],
)
def test_a_schema_no_reader_can_use_is_unreadable(text: str) -> None:
    with pytest.raises(SchemaUnreadable):
        avro_path(RegisteredSchema(1, "AVRO", text), "x")
