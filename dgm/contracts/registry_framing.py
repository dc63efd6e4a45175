"""Records framed for a schema registry: how a reader finds the writer schema's id and the
encoded payload, and why a record yields no id (docs/design.md, "Message identity",
"Records framed for a schema registry").

One definition for both readers: the watch applies `unframe` in Python (watch/registry_ids.py),
the audit the same rules as Spark columns (spark_jobs/audit/registry_columns.py);
tests/watch/test_registry_ids.py holds the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dgm.contracts.registered_schemas import IdKind

# Every registry framing starts the value with this byte.
MAGIC = 0
# Confluent's framing: MAGIC, the schema id in 4 bytes big-endian (the registry's "content"
# id), then the payload. Apicurio's own: MAGIC, its globalId in 8 bytes big-endian.
CONFLUENT_ID_BYTES = 4
APICURIO_ID_BYTES = 8
# Apicurio's header mode: the id rides in a header as 8 bytes big-endian, the value is the
# bare payload. The globalId header wins when both are there (Apicurio writes one).
HEADER_IDS: tuple[tuple[str, IdKind], ...] = (
    ("apicurio.value.globalId", "global"),
    ("apicurio.value.contentId", "content"),
)
# The largest id an 8-byte id may hold: a signed long, as Apicurio's are; a value with the
# top bit set is no id (the record is not framed).
MAX_LONG_ID = 2**63 - 1

Framing = Literal["confluent", "apicurio", "apicurio-header"]

# Why a registry_field rule finds no id: counted per reason, never a crash or a silent drop.
# A lookup failure reads SCHEMA_PREFIX + SchemaLookupError.reason ("schema not found").
NO_VALUE = "no value"
NOT_FRAMED = "not framed"
NO_REGISTRY = "no schema registry"
SCHEMA_PREFIX = "schema "
SCHEMA_UNREADABLE = "schema unreadable"
FORMAT_UNSUPPORTED = "format unsupported"
PAYLOAD_UNREADABLE = "payload unreadable"
FIELD_MISSING = "field missing"
NOT_AN_ID = "field not an id"
EMPTY_ID = "empty id"


@dataclass(frozen=True)
class Framed:
    """A framed record's writer schema id, which registry id that is, and the payload."""

    framing: Framing
    id_kind: IdKind
    schema_id: int
    payload: bytes


def unframe(
    value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None
) -> Framed | str:
    """The framing of a record's value, or the reason it has none (NO_VALUE, NOT_FRAMED).

    Header mode first: a value whose id header is there is its bare payload. Otherwise the
    magic byte, then 4 or 8 id bytes: Confluent's ids start at 1, so 4 zero bytes after the
    magic byte are the high half of Apicurio's 8-byte id (a global id of 2**32 or more framed
    in 8 bytes would read as Confluent's; registries do not hand out ids that high).
    """
    for name, kind in HEADER_IDS:
        raw = _last_header(headers, name)
        if raw is not None:
            if len(raw) != APICURIO_ID_BYTES or value is None:
                return NOT_FRAMED if value is not None else NO_VALUE
            schema_id = int.from_bytes(raw, "big")
            if schema_id > MAX_LONG_ID:
                return NOT_FRAMED
            return Framed("apicurio-header", kind, schema_id, value)
    if value is None:
        return NO_VALUE
    if len(value) < 1 + CONFLUENT_ID_BYTES or value[0] != MAGIC:
        return NOT_FRAMED
    if value[1 : 1 + CONFLUENT_ID_BYTES] != bytes(CONFLUENT_ID_BYTES):
        confluent = int.from_bytes(value[1 : 1 + CONFLUENT_ID_BYTES], "big")
        return Framed("confluent", "content", confluent, value[1 + CONFLUENT_ID_BYTES :])
    end = 1 + APICURIO_ID_BYTES
    if len(value) < end:
        return NOT_FRAMED
    schema_id = int.from_bytes(value[1:end], "big")
    if schema_id == 0:  # no registry hands out id 0
        return NOT_FRAMED
    return Framed("apicurio", "global", schema_id, value[end:])


def _last_header(headers: Sequence[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    # The last non-null value when a header repeats, as every header rule reads it.
    for key, raw in reversed(headers or ()):
        if key == name and raw is not None:
            return raw
    return None


def protobuf_message_indexes(payload: bytes) -> tuple[tuple[int, ...], bytes] | None:
    """Confluent's Protobuf framing puts the message's index path before the message: a
    zigzag varint count, then that many zigzag varints; a single 0 byte means [0] (the first
    message of the file). None when the varints are cut short."""
    at, values = 0, list[int]()
    count: int | None = None
    while count is None or len(values) < count:
        shift, number = 0, 0
        while True:
            if at >= len(payload) or shift > 63:
                return None
            byte = payload[at]
            at += 1
            number |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        decoded = (number >> 1) ^ -(number & 1)  # zigzag
        if count is None:
            if decoded < 0:
                return None
            count = decoded
            if count == 0:
                return (0,), payload[at:]
        else:
            values.append(decoded)
    return tuple(values), payload[at:]
