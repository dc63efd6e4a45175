"""The watch finds the registry_field ids the audit finds: watch/registry_ids.py and
spark_jobs/audit/registry_columns.py on the same awkward records (unions, nulls, nested
records, maps, enums, decimals, two schema versions, every framing, wrong magic bytes,
truncated payloads, unknown schemas; Protobuf records of several schemas, nested, unset,
with wrong indexes, cut short), ids and reasons alike, record by record."""

from __future__ import annotations

import io
import json
import random
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from pyspark.sql.types import StructType

from dgm.config.pipelines import MessageIdRule
from dgm.contracts import registry_framing as framing
from dgm.contracts.protobuf_ids import ProtobufDecoder, protobuf_decoder
from dgm.contracts.registered_schemas import IdKind, RegisteredSchema, SchemaLookupError
from spark_jobs.audit.expected import KAFKA_SOURCE
from spark_jobs.audit.message_id_columns import bounded
from spark_jobs.audit.registry_columns import (
    fetch_schemas,
    final_reason,
    schema_keys,
    with_framing,
    with_registry_ids,
)
from watch import ids
from watch.registry_ids import RegistryIds

# The columns of the Spark Kafka source (includeHeaders=true).
KAFKA_ROW = StructType([f for f in KAFKA_SOURCE.fields if f.name != "timestampType"])
Headers = list[tuple[str, bytes | None]] | None
Record = tuple[bytes | None, Headers]

INNER = {"type": "record", "name": "Inner", "fields": [{"name": "id", "type": ["null", "int"]}]}
KIND = {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}
V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "seq", "type": "long"},
        {"name": "ref", "type": ["null", "string", "long", "bytes", KIND, INNER]},
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "id", "type": ["null", "long"]},
                    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 4}},
                ],
            },
        },
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0},
        },
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "kind", "type": "Kind"},
        {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "flag", "type": "boolean"},
        {"name": "num", "type": ["int", "long"]},
        {"name": "ratio", "type": ["null", "double"]},
    ],
}
# v2: a field added with a default, as a re-serializing processor's newer schema has.
V2 = {
    **V1,
    "fields": [*V1["fields"], {"name": "extra", "type": ["null", "string"], "default": None}],
}
ONE_STRING = {"type": "record", "name": "S", "fields": [{"name": "id", "type": "string"}]}
RECURSIVE = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "id", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
}


PROTO_COMMON = """syntax = "proto3";
package shop.common;
message Customer { optional int64 id = 1; bytes code = 2; }
"""
PROTO_V1 = """syntax = "proto3";
package shop;
import "shop/common.proto";
message Order {
  string id = 1;
  int64 seq = 2;
  oneof ref { string ref_text = 3; Inner ref_inner = 4; }
  shop.common.Customer customer = 5;
  map<string, string> attrs = 6;
  Kind kind = 7;
  bool flag = 8;
  double ratio = 9;
  enum Kind { A = 0; B = 1; }
  message Inner { int32 id = 1; }
}
"""
PROTO_V2 = PROTO_V1.replace("double ratio = 9;", "double ratio = 9;\n  optional string extra = 10;")


def protobuf(schema_id: int, text: str) -> RegisteredSchema:
    return RegisteredSchema(
        schema_id,
        "PROTOBUF",
        text,
        (RegisteredSchema(0, "PROTOBUF", PROTO_COMMON),),
        ("shop/common.proto",),
    )


def avro(schema_id: int, schema: Any) -> RegisteredSchema:
    return RegisteredSchema(schema_id, "AVRO", json.dumps(schema))


SCHEMAS: dict[tuple[IdKind, int], RegisteredSchema] = {
    ("content", 1): avro(1, V1),
    ("content", 2): avro(2, V2),
    ("global", 101): avro(101, V1),
    ("global", 102): avro(102, V2),
    ("content", 3): avro(3, ONE_STRING),
    ("content", 5): RegisteredSchema(5, "JSON", '{"type": "object"}'),
    ("content", 7): RegisteredSchema(
        7, "PROTOBUF", 'syntax = "proto3"; message M { string id = 1; }'
    ),
    ("content", 8): RegisteredSchema(8, "AVRO", "not json"),
    # Protobuf: two versions (v2 adds a field) and one by global id, with a reference.
    ("content", 11): protobuf(11, PROTO_V1),
    ("content", 12): protobuf(12, PROTO_V2),
    ("global", 111): protobuf(111, PROTO_V1),
    ("content", 10): avro(10, RECURSIVE),
}

PATHS = [
    "id", "seq", "ref", "ref.id", "customer.id", "customer.code", "amount", "price",
    "attrs.k", "kind", "when", "uid", "flag", "num", "ratio", "extra", "nope", "customer.nope",
    "ref_text", "ref_inner.id",
]  # fmt: skip


class Schemas:
    """A SchemaLookup over the schemas above: the registry as the readers see it."""

    def schema(self, schema_id: int, id_kind: IdKind = "content") -> RegisteredSchema:
        if (id_kind, schema_id) not in SCHEMAS:
            raise SchemaLookupError("not found", f"{id_kind} id {schema_id}")
        return SCHEMAS[(id_kind, schema_id)]


def random_text(rng: random.Random) -> str:
    return rng.choice(["", "a", "é😀", "x" * 1025, "o-1", "  ", "123", "\u0000"])


def random_order(rng: random.Random, version: int) -> dict[str, Any]:
    ref = rng.choice([
        None, random_text(rng), rng.randint(-(2**63), 2**63 - 1), rng.randbytes(3), b"\xff",
        ("shop.Kind", "B"), ("shop.Inner", {"id": rng.choice([None, 7, -1])}),
    ])  # fmt: skip
    order = {
        "id": random_text(rng),
        "seq": rng.choice([0, -1, 2**63 - 1, rng.randint(0, 99)]),
        "ref": ref,
        "customer": {
            "id": rng.choice([None, 5, -(2**63)]),
            "code": rng.choice([b"abcd", b"\xff\x00\x01\x02"]),
        },
        "amount": Decimal(rng.choice([0, -5, 10**19, 12345678901234567890])),
        "price": Decimal(rng.choice(["1.50", "-0.01", "0.00"])),
        "attrs": rng.choice([{}, {"k": random_text(rng)}, {"j": "v", "k": "w"}]),
        "kind": rng.choice(["A", "B"]),
        "when": rng.randint(0, 2**40),
        "uid": "6f1c2d4e-8a1b-4c2d-9e3f-0a1b2c3d4e5f",
        "flag": rng.random() < 0.5,
        "num": rng.choice([1, 2**40]),
        "ratio": rng.choice([None, 0.5]),
    }
    if version == 2:
        order["extra"] = rng.choice([None, "x", ""])
    return order


def encode(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def framed(rng: random.Random, payload: bytes, version: int) -> Record:
    how = rng.choice(["confluent", "apicurio", "header", "content-header"])
    if how == "confluent":
        return b"\x00" + version.to_bytes(4, "big") + payload, None
    if how == "apicurio":
        return b"\x00" + (100 + version).to_bytes(8, "big") + payload, [("other", b"x")]
    if how == "header":
        return payload, [("apicurio.value.globalId", (100 + version).to_bytes(8, "big"))]
    return payload, [("apicurio.value.contentId", version.to_bytes(8, "big"))]


def generated(seed: int, count: int) -> list[Record]:
    rng = random.Random(seed)
    records: list[Record] = []
    for _ in range(count):
        version = rng.choice([1, 2])
        payload = encode(V1 if version == 1 else V2, random_order(rng, version))
        value, headers = framed(rng, payload, version)
        roll = rng.random()
        if roll < 0.1 and value:  # truncated
            value = value[: rng.randint(0, len(value) - 1)]
        elif roll < 0.15 and value:  # a byte changed
            at = rng.randrange(len(value))
            value = value[:at] + bytes([rng.randint(0, 255)]) + value[at + 1 :]
        records.append((value, headers))
    return records


def protobuf_records(seed: int, count: int) -> list[Record]:
    """Protobuf records of the schemas above: nested messages, unset fields, a oneof, wrong
    and cut-short message indexes, truncated payloads, every framing."""
    rng = random.Random(seed)
    decoder = protobuf_decoder(SCHEMAS[("content", 12)])
    assert isinstance(decoder, ProtobufDecoder)
    order, inner = decoder.message_class((0,)), decoder.message_class((0, 1))
    assert order is not None and inner is not None
    records: list[Record] = []
    for _ in range(count):
        fields: dict[str, Any] = {
            "id": random_text(rng),
            "seq": rng.choice([0, -1, 2**63 - 1, rng.randint(0, 99)]),
            "attrs": rng.choice([{}, {"k": "v"}]),
            "kind": rng.choice([0, 1]),
            "flag": rng.random() < 0.5,
            "ratio": rng.choice([0.0, 0.5]),
        }
        if rng.random() < 0.7:
            fields["customer"] = rng.choice([{}, {"id": 0}, {"id": 5, "code": b"\xff"}])
        ref = rng.choice(["text", "inner", None])
        if ref == "text":
            fields["ref_text"] = random_text(rng)
        elif ref == "inner":
            fields["ref_inner"] = {"id": rng.choice([0, 7])}
        version = rng.choice([11, 12])
        if version == 12 and rng.random() < 0.5:
            fields["extra"] = rng.choice(["", "x"])
        payload = order(**fields).SerializeToString()
        indexes = rng.choice([b"\x00", b"\x00", b"\x02\x00", b"\x02\x02", b"\x04\x00", b""])
        if indexes == b"\x04\x00":  # [0, 1]: the nested Inner
            indexes += b"\x02"
            payload = inner(id=rng.choice([0, 3])).SerializeToString()
        how = rng.choice(["confluent", "global", "header"])
        headers: Headers = None
        if how == "confluent":
            value = b"\x00" + version.to_bytes(4, "big") + indexes + payload
        elif how == "global":
            value = b"\x00" + (111).to_bytes(8, "big") + indexes + payload
        else:
            value = indexes + payload
            headers = [("apicurio.value.contentId", version.to_bytes(8, "big"))]
        if rng.random() < 0.15 and value:  # truncated
            value = value[: rng.randint(0, len(value) - 1)]
        records.append((value, headers))
    return records


def zigzag_string(raw: bytes) -> bytes:
    return bytes([len(raw) * 2]) + raw  # short strings only


def handmade() -> list[Record]:
    order = encode(V1, random_order(random.Random(1), 1))
    content_1, global_101 = (1).to_bytes(8, "big"), (101).to_bytes(8, "big")
    strings = (b"ok", b"\xff\xfe", b"\xed\xa0\x80", b"", "é".encode())
    return [
        (None, None),
        (b"", None),
        (b"\x00", None),
        (b"\x00\x00\x00\x01", None),  # a byte short of Confluent's id
        (b"\x01\x00\x00\x00\x01" + order, None),  # wrong magic byte
        (b"\x00\x00\x00\x00\x00" + order, None),  # id 0
        (b"\x00" + bytes(8) + order, None),  # 8-byte id 0
        (b"\x00\x00\x00\x00\x00\x00\x00\x00", None),  # 8-byte framing cut short
        (b"\x00\xff\xff\xff\xff\xff\xff\xff\xff" + order, None),  # past a signed long
        (b"\x00\x00\x00\x00\x09" + order, None),  # unknown schema id
        (b"\x00\x00\x00\x10\x92" + order, None),
        (b"\x00" + (9).to_bytes(8, "big") + order, None),
        (order, [("apicurio.value.globalId", b"\x00\x01")]),  # header of the wrong length
        (order, [("apicurio.value.globalId", None), ("apicurio.value.contentId", content_1)]),
        (order, [("apicurio.value.globalId", global_101), ("apicurio.value.globalId", None)]),
        (None, [("apicurio.value.globalId", global_101)]),
        (b"\x00\x00\x00\x00\x01", None),  # no payload at all
        (b"\x00\x00\x00\x00\x01" + order + b"trailing", None),
        (b"\x00\x00\x00\x00\x05" + b'{"id": "j-1", "seq": 3, "ref": {"id": 4}}', None),
        (b"\x00\x00\x00\x00\x05" + b'{"id": null, "ref": [1]}', None),
        (b"\x00\x00\x00\x00\x05" + b"{not json", None),
        (b"\x00\x00\x00\x00\x07" + b"\x00\x0a\x01x", None),  # Protobuf: not read yet
        (b"\x00\x00\x00\x00\x08" + order, None),  # a schema that is no Avro
        (b"\x00\x00\x00\x00\x0a" + b"\x02\x00", None),  # a recursive schema
        *((b"\x00\x00\x00\x00\x03" + zigzag_string(raw), None) for raw in strings),
        (b"\x00\x00\x00\x00\x03" + b"\x03", None),  # a negative string length
        (b"\x00\x00\x00\x00\x03" + b"\x40ab", None),  # a string longer than what is left
    ]  # fmt: skip


RULES = [MessageIdRule("registry_field", path) for path in PATHS]


def spark_found(spark: Any, records: list[Record]) -> tuple[list[tuple[Any, ...]], int]:
    """Per record each rule's (id, reason) from one Spark job; and the schemas fetched."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(None, v, "t", 0, n, at, h) for n, (v, h) in enumerate(records)]
    frame = with_framing(spark.createDataFrame(rows, KAFKA_ROW))
    keys = schema_keys(frame)
    schemas = fetch_schemas(keys, Schemas())
    # Every path in one job: with_registry_id's two projections for all of them at once.
    frame, found = with_registry_ids(frame, PATHS, schemas)
    columns = []
    for index, path in enumerate(PATHS):
        path_id, reason = found[path]
        columns += [
            bounded(path_id).alias(f"id{index}"),
            final_reason(path_id, reason).alias(f"why{index}"),
        ]
    collected = frame.select("offset", *columns).orderBy("offset").collect()
    return [tuple(row)[1:] for row in collected], len(keys)


def python_found(reader: RegistryIds, record: Record) -> tuple[Any, ...]:
    value, headers = record
    found: list[Any] = []
    for rule in RULES:
        found.extend(ids.identify(rule, None, value, headers, reader))
    return tuple(found)


def test_python_finds_the_registry_ids_spark_finds(spark: Any) -> None:
    records = handmade() + generated(seed=20261128, count=400) + protobuf_records(7, 120)
    expected, fetched = spark_found(spark, records)
    reader = RegistryIds(Schemas())
    labels = [f"{kind}:{path}" for path in PATHS for kind in ("id", "why")]
    differences = [
        (labels[i], record[0] if record[0] is None else record[0][:80], record[1], want, got)
        for record, wanted in zip(records, expected, strict=True)
        for i, (want, got) in enumerate(zip(wanted, python_found(reader, record), strict=True))
        if want != got
    ]
    assert differences == []
    # Every reason is reached, and ids of every Avro id type.
    reasons = {found for row in expected for found in row[1::2]}
    assert reasons >= {
        None, framing.NO_VALUE, framing.NOT_FRAMED, framing.SCHEMA_PREFIX + "not found",
        framing.SCHEMA_UNREADABLE, framing.PAYLOAD_UNREADABLE,
        framing.FIELD_MISSING, framing.NOT_AN_ID, framing.EMPTY_ID,
    }  # fmt: skip
    # Each schema fetched once by the watch, however many records name it.
    assert reader.lookups == fetched


def test_the_watch_reads_protobuf_records_by_the_shared_decoder() -> None:
    # The decoder both readers run meets the awkward records without an exception, finds
    # ids and every reason, and the watch's reader answers what it answers.
    reader = RegistryIds(Schemas())
    decoders: dict[tuple[IdKind, int], ProtobufDecoder | str] = {}
    found: set[str | None] = set()
    ids_found = 0
    for value, headers in protobuf_records(7, 120):
        framed_record = framing.unframe(value, headers)
        if isinstance(framed_record, str):
            found.add(framed_record)
            continue
        key = (framed_record.id_kind, framed_record.schema_id)
        if key not in decoders:
            decoders[key] = protobuf_decoder(SCHEMAS[key])
        decoder = decoders[key]
        assert isinstance(decoder, ProtobufDecoder)
        for path in PATHS:
            path_id, reason = decoder.find(framed_record.payload, path)
            found.add(reason)
            ids_found += path_id is not None
            assert reader.find(path, value, headers) == (path_id, reason)
    assert found >= {
        None, framing.NOT_FRAMED, framing.PAYLOAD_UNREADABLE, framing.FIELD_MISSING,
        framing.NOT_AN_ID,
    }  # fmt: skip
    assert ids_found > 100


@pytest.mark.parametrize(
    ("path", "order", "wanted"),
    [
        ("id", {"id": "o-1"}, "o-1"),
        ("amount", {"amount": Decimal(-5)}, "-5"),
        ("customer.code", {"customer": {"id": None, "code": b"\xff\x00\x01\x02"}}, "0xFF000102"),
        ("customer.id", {"customer": {"id": None, "code": b"abcd"}}, None),
        ("kind", {"kind": "A"}, None),
        ("ref", {"ref": ("shop.Kind", "A")}, None),
        ("ref.id", {"ref": ("shop.Inner", {"id": 7})}, "7"),
        ("attrs.k", {"attrs": {"k": "v"}}, "v"),
    ],
)
def test_the_watch_reads_avro_ids(path: str, order: dict[str, Any], wanted: str | None) -> None:
    record = {**random_order(random.Random(2), 1), **order}
    value = b"\x00\x00\x00\x00\x01" + encode(V1, record)
    assert (
        ids.message_id(
            MessageIdRule("registry_field", path), None, value, None, RegistryIds(Schemas())
        )
        == wanted
    )
