"""A record's value as an operator reads it: decoded with its writer schema when it is framed
for a schema registry (Avro, JSON Schema, Protobuf), else as JSON or text, else as bytes.
What the duplicate story shows of a copy read back from Kafka (dashboard/panels/copy_values.py);
the published tables never hold a value (docs/design.md, "Records framed for a schema registry").
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
from google.protobuf import json_format

from dgm.contracts.protobuf_ids import protobuf_decoder
from dgm.contracts.registered_schemas import RegisteredSchema, SchemaLookup, SchemaLookupError
from dgm.contracts.registry_framing import NO_VALUE, Framed, unframe

SHOWN_BYTES = 256  # of a value that is neither framed, JSON nor text


@dataclass(frozen=True)
class ValueView:
    """How the value was read (e.g. "Avro, schema 12 (confluent framing)", "JSON", "text",
    "bytes"), the text to show and whether it is JSON."""

    read_as: str
    text: str
    is_json: bool = False


def _json_text(value: Any) -> str:
    # Avro's bytes, decimals and dates have no JSON form: shown as Python writes them.
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _avro(payload: bytes, schema: RegisteredSchema) -> Any:
    named: dict[str, Any] = {}
    for reference in schema.references:  # named types other schemas define, first
        fastavro.parse_schema(json.loads(reference.text), named_schemas=named)
    parsed = fastavro.parse_schema(json.loads(schema.text), named_schemas=named)
    return fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)


def _unframed(value: bytes) -> ValueView:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        shown = value[:SHOWN_BYTES].hex(" ")
        more = f" … ({len(value)} bytes)" if len(value) > SHOWN_BYTES else ""
        return ValueView("bytes (hex)", shown + more)
    try:
        return ValueView("JSON", _json_text(json.loads(text)), is_json=True)
    except ValueError:
        return ValueView("text", text)


def value_view(
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    schemas: SchemaLookup | None,
) -> ValueView:
    """The value decoded as well as dgm can: a framed value by its writer schema, fetched
    from `schemas` (the cluster's registry; None: none configured)."""
    framed = unframe(value, headers)
    if not isinstance(framed, Framed):
        if framed == NO_VALUE or value is None:
            return ValueView("no value (a tombstone)", "")
        return _unframed(value)
    told = f"schema {framed.schema_id} ({framed.framing} framing)"
    if schemas is None:
        return ValueView(f"framed for a registry, {told}: no [schema_registry] configured", "")
    try:
        schema = schemas.schema(framed.schema_id, framed.id_kind)
    except SchemaLookupError as error:
        return ValueView(f"framed for a registry, {told}: schema not had ({error})", "")
    try:
        if schema.format == "AVRO":
            return ValueView(f"Avro, {told}", _json_text(_avro(framed.payload, schema)), True)
        if schema.format == "JSON":
            decoded = json.loads(framed.payload.decode("utf-8"))
            return ValueView(f"JSON Schema, {told}", _json_text(decoded), True)
    except (ValueError, EOFError, IndexError, KeyError, TypeError) as error:
        return ValueView(f"{told}: does not decode ({type(error).__name__}: {error})", "")
    return _protobuf(framed.payload, schema, told)


def _protobuf(payload: bytes, schema: RegisteredSchema, told: str) -> ValueView:
    decoder = protobuf_decoder(schema)
    record = decoder if isinstance(decoder, str) else decoder.parse(payload)
    if isinstance(record, str):
        return ValueView(f"Protobuf, {told}: does not decode ({record})", "")
    name = record.DESCRIPTOR.full_name
    # Field names as the .proto writes them; 64-bit integers as JSON numbers would lose
    # digits, so protobuf's JSON mapping writes them as strings.
    as_dict = json_format.MessageToDict(record, preserving_proto_field_name=True)
    return ValueView(f"Protobuf {name}, {told}", _json_text(as_dict), True)
