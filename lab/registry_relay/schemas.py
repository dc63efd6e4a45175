"""The order schemas the re-serializing relay reads and writes, in each registry format it
speaks (Avro, JSON Schema, Protobuf: protobuf_orders.py): v2 adds a field with a default (a
compatible evolution), so every re-serialized record's bytes differ from its source's. The
serializers and deserializers are confluent-kafka's own, what producers and consumers of such
topics use."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any, Literal, cast

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

from lab.registry_relay import protobuf_orders

Format = Literal["avro", "json_schema", "protobuf"]
FORMATS: tuple[Format, ...] = ("avro", "json_schema", "protobuf")
# confluent-kafka's current Protobuf framing (message indexes as zigzag varints).
_PROTOBUF_CONFIG = {"use.deprecated.format": False}
ID_FIELD = "order_id"

_AVRO_FIELDS: list[dict[str, object]] = [
    {"name": "order_id", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None},
]
_REGION_AVRO = {"name": "region", "type": "string", "default": "unknown"}
_JSON_PROPERTIES: dict[str, object] = {
    "order_id": {"type": "string"},
    "amount": {"type": "number"},
    "note": {"type": ["null", "string"]},
}


def _avro(version: int) -> str:
    fields = _AVRO_FIELDS + ([_REGION_AVRO] if version == 2 else [])
    return json.dumps(
        {"type": "record", "name": "Order", "namespace": "lab.avro", "fields": fields}
    )


def _json_schema(version: int) -> str:
    extra = {"region": {"type": "string", "default": "unknown"}} if version == 2 else {}
    return json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": _JSON_PROPERTIES | extra,
            "required": ["order_id", "amount"],
        }
    )


def schema(form: Format, version: int) -> str:
    """The order schema of `version` (1 or 2) in `form`."""
    if form == "protobuf":
        return protobuf_orders.proto(version)
    return _avro(version) if form == "avro" else _json_schema(version)


Serdes = Callable[..., Any]


def serializer(form: Format, registry: SchemaRegistryClient, version: int) -> Serdes:
    """confluent-kafka's serializer of `form`, writing `version` of the order schema."""
    if form == "avro":
        return cast(Serdes, AvroSerializer(registry, schema(form, version)))
    if form == "protobuf":
        serialize = ProtobufSerializer(
            protobuf_orders.order_class(version), registry, _PROTOBUF_CONFIG
        )
        return lambda record, context: serialize(
            protobuf_orders.to_message(record, version), context
        )
    return cast(Serdes, JSONSerializer(schema(form, version), registry))


def deserializer(form: Format, registry: SchemaRegistryClient, version: int | None) -> Serdes:
    """confluent-kafka's deserializer of `form`: read as `version` (None: as written)."""
    if form == "avro":
        read_as = None if version is None else schema(form, version)
        return cast(Serdes, AvroDeserializer(registry, read_as))
    if form == "protobuf":  # by the reader's own class, as generated code reads; None: v2,
        # which reads both versions (a v1 record has no region)
        deserialize = ProtobufDeserializer(
            protobuf_orders.order_class(version or 2), _PROTOBUF_CONFIG
        )
        return lambda value, context: protobuf_orders.to_record(deserialize(value, context))
    # JSON Schema: the writer's schema, fetched by the framed id, validates the record.
    return cast(Serdes, JSONDeserializer(None, schema_registry_client=registry))


def order(n: int) -> dict[str, object]:
    """The n-th source record (v1): its id is the only thing the pipeline must keep."""
    return {"order_id": f"order-{n:06d}", "amount": n * 0.25, "note": None if n % 3 else "gift"}


def enriched(record: dict[str, object]) -> dict[str, object]:
    """What the relay writes for a v1 record (v2)."""
    return {**record, "region": "eu" if zlib.crc32(str(record["order_id"]).encode()) % 2 else "us"}
