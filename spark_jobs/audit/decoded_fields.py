"""`fields`, the record's value decoded, for the `expected` predicates that name it
(docs/design.md, "filtered"): a VARIANT, so `variant_get(fields, '$.type', 'string')` reads a
field whatever the record's format.

- Framed for a schema registry: decoded by its writer schema, as the id rules decode
  (registry_columns.py): Avro by `from_avro` with the self-contained schema (logical types
  read as their underlying types, a union of several types as Spark's member0, member1…),
  JSON Schema as its JSON, Protobuf in protobuf's JSON mapping (protobuf_columns.py).
- Not framed: the value as JSON when it is JSON (a plain JSON topic's records).
- Anything else (a schema the registry does not give, a payload that does not decode, a
  value that is not JSON): NULL, so the predicate is undecided for it, never a guess.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from dgm.contracts.avro_paths import SchemaUnreadable, avro_path
from dgm.contracts.registered_schemas import RegisteredSchema, SchemaLookup
from spark_jobs.audit.protobuf_columns import compiled, protobuf_json
from spark_jobs.audit.registry_columns import (
    KIND,
    PAYLOAD,
    SCHEMA_ID,
    UNFRAMED,
    Schemas,
    fetch_schemas,
    schema_keys,
    spark_reads,
    with_framing,
)

FIELDS = "fields"
_NAMES_FIELDS = re.compile(rf"\b{FIELDS}\b", re.IGNORECASE)
_FRAMING = (KIND, SCHEMA_ID, PAYLOAD, UNFRAMED)


def names_fields(predicate: str) -> bool:
    """Whether a predicate may read `fields` (a word match: decoding a batch costs a job,
    so it is done only for the predicates that may want it)."""
    return bool(_NAMES_FIELDS.search(predicate))


def no_fields() -> Column:
    """`fields` of no record: the column a predicate is checked against."""
    return F.try_parse_json(F.lit(None).cast("string")).alias(FIELDS)


def with_fields(
    records: DataFrame, lookup: SchemaLookup | None, schemas: Schemas | None = None
) -> DataFrame:
    """Kafka source rows with FIELDS: `schemas`, the batch's (registry_columns.batch_schemas'
    for a registry_field rule), else listed by a small job and fetched on the driver."""
    framed = with_framing(records)
    if schemas is None:
        schemas = fetch_schemas(schema_keys(framed), lookup)
    decoded = F.when(F.col(UNFRAMED).isNotNull(), F.try_parse_json(F.col("value").cast("string")))
    shipped, _ = compiled(
        {k: s for k, s in schemas.items() if not isinstance(s, str) and s.format == "PROTOBUF"}
    )
    as_json = protobuf_json(shipped, F.col(KIND), F.col(SCHEMA_ID), F.col(PAYLOAD))
    for key, schema in sorted(schemas.items()):
        match = (F.col(KIND) == F.lit(key[0])) & (F.col(SCHEMA_ID) == F.lit(key[1]))
        value: Column | None = None
        if isinstance(schema, str):  # no schema: no fields
            pass
        elif schema.format == "JSON":
            value = F.try_parse_json(F.col(PAYLOAD).cast("string"))
        elif schema.format == "PROTOBUF":
            value = F.try_parse_json(as_json) if key in shipped else None
        else:
            value = _avro(framed, schema)
        if value is not None:
            decoded = decoded.when(match, value)
    return framed.withColumn(FIELDS, decoded).drop(*_FRAMING)


def _avro(framed: DataFrame, schema: RegisteredSchema) -> Column | None:
    try:
        text = avro_path(schema, "").decoding_text
    except SchemaUnreadable:
        return None
    if not spark_reads(framed.sparkSession, text):
        return None
    return F.to_variant_object(from_avro(F.col(PAYLOAD), text, {"mode": "PERMISSIVE"}))
