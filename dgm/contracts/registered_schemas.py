"""Schemas as a schema registry holds them: what the readers of framed records ask for.

A record in a registry's wire format names its writer schema by id; the audit and the watch
decode it with the schema a `SchemaLookup` returns. The core's HTTP implementation is
`dgm.clients.schema_registry.RegistrySchemas`; a reader depends on this protocol only, so
tests and the Spark executors can hand it any lookup (a cache filled on the driver, say).

Two kinds of id, because registries frame records two ways:
- "content": the 4-byte id of Confluent's framing (magic byte 0, then the id). In Apicurio's
  Confluent-compatible API it is the schema's contentId.
- "global": the 8-byte id of Apicurio's own framing and header mode, its globalId (one per
  artifact version).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

SchemaFormat = Literal["AVRO", "PROTOBUF", "JSON"]
IdKind = Literal["content", "global"]
SCHEMA_FORMATS: tuple[SchemaFormat, ...] = ("AVRO", "PROTOBUF", "JSON")


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema by id, with the schemas it references resolved (recursively)."""

    schema_id: int  # the id the record's framing carries
    format: SchemaFormat
    text: str  # the schema as registered (Avro JSON, .proto text, JSON Schema)
    references: tuple[RegisteredSchema, ...] = ()  # referenced schemas, resolved
    reference_names: tuple[str, ...] = ()  # the name each reference is imported under


class SchemaLookupError(Exception):
    """A schema that could not be had; `reason` is short enough to count records by
    ("not found", "unauthorized", "forbidden", "unreachable", "bad response", ...)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail

    def __reduce__(self) -> tuple[type[SchemaLookupError], tuple[str, str]]:
        # Pickled with its reason intact (Spark ships errors and lookups between processes).
        return (type(self), (self.reason, self.detail))


class SchemaLookup(Protocol):
    """Schemas by the id a record's framing carries."""

    def schema(self, schema_id: int, id_kind: IdKind = "content") -> RegisteredSchema:
        """The schema registered under `schema_id`; raises SchemaLookupError otherwise."""
        ...


# Events (the `events` sample kind) the audit records about a registry: a schema it could not
# fetch for a topic's records, and the same schema fetched for that topic again later.
SCHEMA_LOOKUP_FAILED = "schema_lookup_failed"
SCHEMA_LOOKUP_RESTORED = "schema_lookup_restored"
