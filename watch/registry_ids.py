"""Ids of records framed for a schema registry, without Spark: the twin of
spark_jobs/audit/registry_columns.py, both applying dgm/contracts/registry_framing.py and
dgm/contracts/avro_paths.py. tests/watch/test_registry_ids.py holds the two equal.

Decoders are cached per (id kind, schema id): a topic carries a handful of schemas, so each
is fetched and parsed once a run; a failed fetch is retried after RETRY_AFTER, so a registry
that was down for a moment does not leave a schema unreadable for the whole run.
"""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import fastavro

from dgm.contracts import registry_framing as framing
from dgm.contracts.avro_paths import (
    AvroPath,
    Branch,
    Field,
    Leaf,
    Missing,
    Node,
    SchemaUnreadable,
    Union,
    avro_path,
)
from dgm.contracts.message_ids import bytes_text
from dgm.contracts.protobuf_ids import protobuf_decoder
from dgm.contracts.registered_schemas import (
    IdKind,
    RegisteredSchema,
    SchemaLookup,
    SchemaLookupError,
)
from watch.ids import json_id_reason

Headers = Sequence[tuple[str, bytes | None]] | None
# (id, None) for an id, (None, reason) for none: the reasons of registry_framing.
Found = tuple[str | None, str | None]
RETRY_AFTER = 30.0  # seconds before a failed schema lookup is tried again


@dataclass(frozen=True)
class _Decoder:
    path: AvroPath
    parsed: Any  # fastavro's parsed schema


class RegistryIds:
    """Finds registry_field ids; holds the schemas fetched and counts lookups and failures
    (a failed fetch is an event the watch reports)."""

    def __init__(self, lookup: SchemaLookup | None) -> None:
        self.lookup = lookup
        self.lookups = 0
        self.failures: Counter[str] = Counter()
        self._schemas: dict[tuple[IdKind, int], RegisteredSchema] = {}
        self._failed: dict[tuple[IdKind, int], tuple[str, float]] = {}
        self._decoders: dict[tuple[IdKind, int, str], _Decoder | str] = {}

    def find(self, dotted: str, value: bytes | None, headers: Headers) -> Found:
        """The raw id at `dotted` (before the empty and length rules), or why there is none."""
        framed = framing.unframe(value, headers)
        if isinstance(framed, str):
            return None, framed
        schema = self._schema(framed.id_kind, framed.schema_id)
        if isinstance(schema, str):
            return None, schema
        if schema.format == "JSON":
            return json_id_reason(framed.payload, dotted)
        if schema.format == "PROTOBUF":
            found = protobuf_decoder(schema)  # made once a schema
            return (None, found) if isinstance(found, str) else found.find(framed.payload, dotted)
        if schema.format != "AVRO":
            return None, framing.FORMAT_UNSUPPORTED
        decoder = self._decoder(framed.id_kind, schema, dotted)
        if isinstance(decoder, str):
            return None, decoder
        try:
            record: Any = fastavro.schemaless_reader(
                _Strict(framed.payload),
                decoder.parsed,
                None,
                return_named_type=True,
                # Strings read as keys do: invalid UTF-8 becomes 0x<HEX> at the leaf, and
                # elsewhere it makes no record unreadable (Spark does not check it either).
                handle_unicode_errors="surrogateescape",
            )
        except Exception:  # any malformed payload: Spark's PERMISSIVE from_avro gives nulls
            return None, framing.PAYLOAD_UNREADABLE
        fields = decoder.path.fields
        if fields and all(record.get(name) is None for name in fields):
            return None, framing.PAYLOAD_UNREADABLE  # as Spark must read it (AvroPath.fields)
        return avro_id(decoder.path.node, record)

    def _schema(self, kind: IdKind, schema_id: int) -> RegisteredSchema | str:
        key = (kind, schema_id)
        if key in self._schemas:
            return self._schemas[key]
        if self.lookup is None:
            return framing.NO_REGISTRY
        failed = self._failed.get(key)
        if failed is not None and time.monotonic() - failed[1] < RETRY_AFTER:
            return failed[0]
        self.lookups += 1
        try:
            schema = self.lookup.schema(schema_id, kind)
        except SchemaLookupError as error:
            reason = framing.SCHEMA_PREFIX + error.reason
            self.failures[reason] += 1
            self._failed[key] = (reason, time.monotonic())
            return reason
        self._failed.pop(key, None)
        self._schemas[key] = schema
        return schema

    def _decoder(self, kind: IdKind, schema: RegisteredSchema, dotted: str) -> _Decoder | str:
        key = (kind, schema.schema_id, dotted)
        if key not in self._decoders:
            self._decoders[key] = decoder(schema, dotted)
        return self._decoders[key]


def decoder(schema: RegisteredSchema, dotted: str) -> _Decoder | str:
    """The path tree and fastavro schema of an Avro schema; SCHEMA_UNREADABLE if none."""
    try:
        path = avro_path(schema, dotted)
        return _Decoder(path, fastavro.parse_schema(json.loads(path.decoding_text)))
    except (
        SchemaUnreadable,
        fastavro.schema.SchemaParseException,
        ValueError,
        TypeError,
        KeyError,
    ):
        return framing.SCHEMA_UNREADABLE


class _Strict(io.BytesIO):
    """A payload that refuses short reads, as Avro's Java decoder does (fastavro would take
    what is left of a truncated string and go on)."""

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise EOFError("negative length")
        data = super().read(size)
        if len(data) < size:
            raise EOFError("payload cut short")
        return data


# Python types of fastavro's values, by the Avro types they may be in a union (named types
# come as (full name, value) with return_named_type).
_PYTHON_TYPES: tuple[tuple[type, tuple[str, ...]], ...] = (
    (bool, ("boolean",)),
    (int, ("int", "long")),
    (float, ("float", "double")),
    (str, ("string",)),
    (bytes, ("bytes",)),
    (Decimal, ("bytes",)),
    (list, ("array",)),
    (dict, ("map",)),
)


def avro_id(node: Node, value: Any) -> Found:
    """The id `node` leads to in a decoded record, or why there is none."""
    if value is None or isinstance(node, Missing):
        return None, framing.FIELD_MISSING
    if isinstance(node, Field):
        if not isinstance(value, dict):
            return None, framing.NOT_AN_ID
        return avro_id(node.child, value.get(node.name))
    if isinstance(node, Union):
        branch = _branch(node.branches, value)
        if branch is None:
            return None, framing.PAYLOAD_UNREADABLE
        inner = value[1] if isinstance(value, tuple) else value
        return avro_id(branch.child, inner)
    return _leaf(node, value[1] if isinstance(value, tuple) else value)


def _branch(branches: tuple[Branch, ...], value: Any) -> Branch | None:
    if isinstance(value, tuple):
        return next((b for b in branches if b.avro_type == value[0]), None)
    for python_type, avro_types in _PYTHON_TYPES:
        if isinstance(value, python_type):
            return next((b for b in branches if b.avro_type in avro_types), None)
    return None


def _leaf(leaf: Leaf, value: Any) -> Found:
    if leaf.id_type is None:
        return None, framing.NOT_AN_ID
    if leaf.id_type == "text" and isinstance(value, str):
        return bytes_text(value.encode("utf-8", "surrogateescape")), None
    if leaf.id_type == "bytes" and isinstance(value, bytes):
        return bytes_text(value), None
    if leaf.id_type == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return str(value), None
    if leaf.id_type == "decimal" and isinstance(value, Decimal):
        digits = len(value.as_tuple().digits)
        if digits > leaf.precision and value != 0:
            # Spark's from_avro refuses the whole record when a decimal overflows its
            # precision: so does the watch.
            return None, framing.PAYLOAD_UNREADABLE
        return str(int(value)), None
    return None, framing.NOT_AN_ID
