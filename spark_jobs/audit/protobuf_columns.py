"""Ids of Protobuf records framed for a schema registry, as one Spark column: the watch's own
decoder (dgm/contracts/protobuf_ids.py) run by Spark's Python workers over Arrow batches.

Spark's JVM has no Protobuf decoder here (spark-protobuf is not on the Maven Central dgm
resolves from), so this is the one registry format the audit decodes outside the JVM. It is
still no Python call per row from Spark: a batch of rows comes in one call, is grouped by
schema id, and each record's payload is parsed once by protobuf's C runtime for every path.
The driver compiles each schema (protoc runs there only) and ships its descriptor set inside
the function, so the executors of a standalone cluster need no registry and no protoc; a
worker builds each schema's message classes once and keeps them for the batches after.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
from google.protobuf import descriptor_pb2, json_format
from pyspark.sql import Column
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import StringType, StructField, StructType

from dgm.contracts.protobuf_ids import ProtobufDecoder, compiled_decoder, protobuf_decoder
from dgm.contracts.protobuf_schemas import compiled_from
from dgm.contracts.registered_schemas import IdKind, RegisteredSchema

SchemaKey = tuple[IdKind, int]
# A compiled schema as it travels to the executors: its serialized descriptor set.
Shipped = dict[SchemaKey, bytes]

# Decoders a Python worker built, by the digest of the descriptor set: workers are reused
# between batches and tasks, so a schema's message classes are made once a worker.
_BUILT: dict[str, ProtobufDecoder] = {}


def id_field(position: int) -> str:
    return f"id_{position}"


def why_field(position: int) -> str:
    return f"why_{position}"


def compiled(schemas: Mapping[SchemaKey, RegisteredSchema]) -> tuple[Shipped, dict[SchemaKey, str]]:
    """The Protobuf schemas compiled on the driver: what to ship, and the keys whose records
    have no id for a reason the schema alone gives (it does not compile)."""
    shipped: Shipped = {}
    refused: dict[SchemaKey, str] = {}
    for key, schema in schemas.items():
        decoder = protobuf_decoder(schema)
        if isinstance(decoder, str):
            refused[key] = decoder
        else:
            shipped[key] = decoder.compiled.files.SerializeToString()
    return shipped, refused


def protobuf_ids(shipped: Shipped, paths: list[str], kind: Column, schema_id: Column,
                 payload: Column) -> Column:  # fmt: skip
    """A struct column: id_i and why_i, each path's raw id and reason, for the records of a
    shipped schema (null for every other record)."""
    fields = []
    for position in range(len(paths)):
        fields += [StructField(id_field(position), StringType()),
                   StructField(why_field(position), StringType())]  # fmt: skip
    wanted = tuple(paths)

    def found(decoder: ProtobufDecoder, payload: bytes) -> list[Any]:
        return [part for pair in decoder.find_each(payload, wanted) for part in pair]

    return _by_schema(shipped, StructType(fields), found, kind, schema_id, payload)


def protobuf_json(shipped: Shipped, kind: Column, schema_id: Column, payload: Column) -> Column:
    """The record of each shipped schema's payload in protobuf's JSON mapping (field names as
    the .proto writes them); null for a payload that does not parse and every other record."""

    def as_json(decoder: ProtobufDecoder, payload: bytes) -> list[Any]:
        record = decoder.parse(payload)
        if isinstance(record, str):
            return [None]
        return [json_format.MessageToJson(record, preserving_proto_field_name=True, indent=None)]

    text = StructType([StructField("json", StringType())])
    decoded: Column = _by_schema(shipped, text, as_json, kind, schema_id, payload)
    return decoded.getField("json")


def _by_schema(
    shipped: Shipped,
    found_type: StructType,
    per_record: Callable[[ProtobufDecoder, bytes], list[Any]],
    kind: Column,
    schema_id: Column,
    payload: Column,
) -> Column:
    """A pandas UDF: each Arrow batch grouped by schema id, `per_record` run on each payload
    of a shipped schema (its row of found_type's fields), nulls for the other rows."""
    width = len(found_type.fields)
    by_digest = {key: hashlib.sha256(files).hexdigest() for key, files in shipped.items()}
    files_of = {by_digest[key]: files for key, files in shipped.items()}

    def decode(kinds: pd.Series, ids: pd.Series, payloads: pd.Series) -> pd.DataFrame:
        rows: list[list[Any]] = [[None] * width for _ in range(len(payloads))]
        keyed = pd.DataFrame({"kind": kinds, "id": ids})
        for (group_kind, group_id), positions in keyed.groupby(["kind", "id"]).indices.items():
            digest = by_digest.get((group_kind, int(group_id)))
            if digest is None:
                continue  # not a Protobuf schema of this batch: another column reads it
            decoder = _decoder(digest, files_of[digest])
            for at in positions:
                value = payloads.iat[at]
                if value is not None:
                    rows[at] = per_record(decoder, bytes(value))
        return pd.DataFrame(rows, columns=found_type.names)

    udf = pandas_udf(decode, found_type)  # type: ignore[call-overload]
    decoded: Column = udf(kind, schema_id, payload)
    return decoded


def _decoder(digest: str, files: bytes) -> ProtobufDecoder:
    if digest not in _BUILT:
        described = descriptor_pb2.FileDescriptorSet.FromString(files)
        _BUILT[digest] = compiled_decoder(compiled_from(described))
    return _BUILT[digest]
