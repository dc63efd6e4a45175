"""Ids inside Protobuf records framed for a schema registry: the payload after the schema id
parsed by protobuf's own runtime (a message class made from the compiled descriptor set,
dgm/contracts/protobuf_schemas.py), then the dotted path walked. Both readers run this very
code: the watch per record (watch/registry_ids.py), the audit in Spark's Python workers a
batch at a time (spark_jobs/audit/protobuf_columns.py), there being no Protobuf decoder in
Spark's JVM to run (spark-protobuf is not on the Maven Central dgm resolves from).

Which values are ids mirrors the Avro rule (docs/design.md, "Records framed for a schema
registry"): strings; int32, int64, uint32, uint64, sint32, sint64, fixed32, fixed64,
sfixed32, sfixed64; bytes (read as a key is). Not ids: enums, bools, floats and doubles,
messages, repeated fields and maps. Presence:
- a message field that is not set, a oneof member that is not the one set, a field with
  explicit presence (proto2, proto3 `optional`) that is not set: field missing;
- a proto3 string or bytes field without presence reads "" when unset, the empty id: no id,
  "empty id", as an empty Avro string is;
- a proto3 integer without presence reads 0 when unset, and proto3 writes nothing for a 0:
  no record tells an id 0 from none, and taking 0 as an id would make every record without
  one a copy of the others, so it is field missing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from dgm.contracts import registry_framing as framing
from dgm.contracts.message_ids import bytes_text
from dgm.contracts.protobuf_schemas import (
    CompiledSchema,
    ProtobufUnreadable,
    compile_schema,
    message_name,
)
from dgm.contracts.registered_schemas import RegisteredSchema

# (id, None) for an id, (None, reason) for none, as watch/registry_ids.py's Found.
Found = tuple[str | None, str | None]

_INTEGERS = frozenset({
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
})  # fmt: skip
_MESSAGES = frozenset({FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP})


@dataclass
class ProtobufDecoder:
    """One schema's message classes, made on first use per message the indexes name."""

    compiled: CompiledSchema
    pool: descriptor_pool.DescriptorPool
    _classes: dict[tuple[int, ...], type[Message] | None] = field(default_factory=dict)

    def message_class(self, indexes: tuple[int, ...]) -> type[Message] | None:
        if indexes not in self._classes:
            name = message_name(self.compiled, indexes)
            self._classes[indexes] = (
                None
                if name is None
                else message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))
            )
        return self._classes[indexes]

    def find(self, payload: bytes, dotted: str) -> Found:
        """The raw id at `dotted` in a payload that starts with the message indexes."""
        return self.find_each(payload, (dotted,))[0]

    def find_each(self, payload: bytes, paths: tuple[str, ...]) -> list[Found]:
        """find() for several paths, the payload parsed once."""
        record = self.parse(payload)
        if isinstance(record, str):
            return [(None, record)] * len(paths)
        return [protobuf_id(record, tuple(dotted.split("."))) for dotted in paths]

    def parse(self, payload: bytes) -> Message | str:
        """The record a payload (the message indexes first) holds, or why it holds none."""
        split = framing.protobuf_message_indexes(payload)
        if split is None:
            return framing.NOT_FRAMED  # the indexes cut short
        indexes, body = split
        message_class = self.message_class(indexes)
        if message_class is None:
            return framing.NOT_FRAMED  # indexes naming no message of the schema
        try:
            return message_class.FromString(body)
        except (DecodeError, RuntimeError, ValueError):
            return framing.PAYLOAD_UNREADABLE


@functools.lru_cache(maxsize=256)
def protobuf_decoder(schema: RegisteredSchema) -> ProtobufDecoder | str:
    """A decoder for a Protobuf schema, or SCHEMA_UNREADABLE when it does not compile; made
    once a schema for every reader of the process (protoc runs once, not once a batch, a
    record or a copy shown)."""
    try:
        return compiled_decoder(compile_schema(schema))
    except (ProtobufUnreadable, TypeError, ValueError, KeyError):
        return framing.SCHEMA_UNREADABLE


def compiled_decoder(compiled: CompiledSchema) -> ProtobufDecoder:
    """A decoder over a compiled schema (also where protoc is not: Spark's executors get the
    descriptor set the driver compiled). One pool per schema, since two versions of a schema
    define the same message names."""
    pool = descriptor_pool.DescriptorPool()
    for file in compiled.files.file:  # imports come first in protoc's output
        pool.Add(file)
    return ProtobufDecoder(compiled, pool)


def protobuf_id(record: Message, steps: tuple[str, ...]) -> Found:
    """The id `steps` lead to in a parsed record, or why there is none."""
    message: Any = record
    descriptor: Descriptor = record.DESCRIPTOR
    for at, name in enumerate(steps):
        found = descriptor.fields_by_name.get(name)
        if found is None:
            return None, framing.FIELD_MISSING
        if found.is_repeated:  # maps are repeated entries
            return None, framing.NOT_AN_ID
        last = at == len(steps) - 1
        if found.has_presence and not message.HasField(name):
            return None, framing.FIELD_MISSING  # unset message, oneof member, optional
        if last:
            return _leaf(found, getattr(message, name))
        if found.type not in _MESSAGES:
            return None, framing.NOT_AN_ID  # a path into a value that has no fields
        message, descriptor = getattr(message, name), found.message_type
    return None, framing.NOT_AN_ID  # an empty path: the record itself


def _leaf(found: FieldDescriptor, value: Any) -> Found:
    if found.type == FieldDescriptor.TYPE_STRING:
        return bytes_text(value.encode("utf-8")), None
    if found.type == FieldDescriptor.TYPE_BYTES:
        return bytes_text(value), None
    if found.type in _INTEGERS:
        if value == 0 and not found.has_presence:
            return None, framing.FIELD_MISSING  # proto3 writes no 0: unset and 0 are one
        return str(value), None
    return None, framing.NOT_AN_ID
