"""Ids of records framed for a schema registry, as Spark columns: the rules of
dgm/contracts/registry_framing.py and dgm/contracts/avro_paths.py in Catalyst expressions.
watch/registry_ids.py is the Python twin; tests/watch/test_registry_ids.py holds them equal.

Decoding is vectorized by schema id, never a Python call per record: `schema_keys` is a small
job that lists the (id kind, schema id) pairs a batch holds; the driver fetches each schema
(`fetch_schemas`); `with_registry_id` then adds one column per schema,
`CASE WHEN schema = k THEN from_avro(payload, schema_k)`, in a projection of its own (Spark
keeps a costly expression used twice out of the next projection, so each record is decoded
once), and the id and its reason read from those columns. Schemas travel inside the
expression, so executors of a standalone cluster need no file and no registry access.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from dgm.clients.schema_registry import RegistrySchemas
from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule
from dgm.config.schema_registry import SchemaRegistryConfig
from dgm.contracts import registry_framing as framing
from dgm.contracts.avro_paths import Field, Leaf, Missing, Node, SchemaUnreadable, Union, avro_path
from dgm.contracts.clusters import split
from dgm.contracts.message_ids import HEX_PREFIX, JSON_ID_DECIMAL, JSON_ID_TYPES
from dgm.contracts.registered_schemas import (
    IdKind,
    RegisteredSchema,
    SchemaLookup,
    SchemaLookupError,
)
from spark_jobs.audit.protobuf_columns import compiled, id_field, protobuf_ids, why_field

log = logging.getLogger(__name__)

SchemaKey = tuple[IdKind, int]
# The registry of the cluster a topic (as dgm names it) lives on; None where it has none.
Lookups = Callable[[str], SchemaLookup | None]
# What the driver found for each key: the schema, or the reason records of it have no id.
Schemas = Mapping[SchemaKey, RegisteredSchema | str]

KIND, SCHEMA_ID, PAYLOAD, UNFRAMED = (
    "_dgm_id_kind",
    "_dgm_schema_id",
    "_dgm_payload",
    "_dgm_unframed",
)
_DECODED = "_dgm_decoded_{}"
_PROTOBUF = "_dgm_protobuf"
_LONG = 2**31 - 1  # substring's length for "the rest"


def _last_header(name: str) -> Column:
    matching = F.filter("headers", lambda h: (h["key"] == F.lit(name)) & h["value"].isNotNull())
    return F.try_element_at(matching, F.lit(-1))["value"]


def _long(raw: Column) -> Column:
    # Big-endian bytes as a bigint; null past a signed long (conv reads them unsigned).
    return F.conv(F.hex(raw), 16, 10).try_cast("bigint")


def framing_columns() -> dict[str, Column]:
    """registry_framing.unframe as columns over a Kafka row: the id kind, the schema id, the
    payload, and the reason when the record is not framed (then the others are null)."""
    value = F.col("value")
    (global_name, _), (content_name, _) = framing.HEADER_IDS
    by_global, by_content = _last_header(global_name), _last_header(content_name)
    in_header = F.coalesce(by_global, by_content)
    header_kind = F.when(by_global.isNotNull(), F.lit("global")).otherwise(F.lit("content"))
    header_id = _long(in_header)
    confluent_bytes = F.substring(value, 2, framing.CONFLUENT_ID_BYTES)
    apicurio_end = 1 + framing.APICURIO_ID_BYTES
    apicurio_id = _long(F.substring(value, 2, framing.APICURIO_ID_BYTES))
    is_confluent = F.hex(confluent_bytes) != F.lit("00" * framing.CONFLUENT_ID_BYTES)
    header_mode = in_header.isNotNull()
    unframed = (
        F.when(header_mode & value.isNull(), F.lit(framing.NO_VALUE))
        .when(
            header_mode & ((F.length(in_header) != 8) | header_id.isNull()),
            F.lit(framing.NOT_FRAMED),
        )
        .when(header_mode, F.lit(None))
        .when(value.isNull(), F.lit(framing.NO_VALUE))
        .when(
            (F.length(value) < 1 + framing.CONFLUENT_ID_BYTES)
            | (F.hex(F.substring(value, 1, 1)) != F.lit(f"{framing.MAGIC:02X}")),
            F.lit(framing.NOT_FRAMED),
        )
        .when(is_confluent, F.lit(None))
        .when((F.length(value) < apicurio_end) | ~(apicurio_id > 0), F.lit(framing.NOT_FRAMED))
    )
    framed = unframed.isNull()
    return {
        KIND: F.when(
            framed,
            F.when(header_mode, header_kind).when(is_confluent, "content").otherwise("global"),
        ),
        SCHEMA_ID: F.when(
            framed,
            F.when(header_mode, header_id)
            .when(is_confluent, F.conv(F.hex(confluent_bytes), 16, 10).cast("bigint"))
            .otherwise(apicurio_id),
        ),
        PAYLOAD: F.when(
            framed,
            F.when(header_mode, value)
            .when(is_confluent, F.substring(value, 2 + framing.CONFLUENT_ID_BYTES, _LONG))
            .otherwise(F.substring(value, 1 + apicurio_end, _LONG)),
        ),
        UNFRAMED: unframed,
    }


def with_framing(records: DataFrame) -> DataFrame:
    return records.withColumns(framing_columns())


def schema_keys(framed: DataFrame) -> list[SchemaKey]:
    """The (id kind, schema id) pairs of a framed batch: one small job, a few rows back."""
    rows = framed.where(F.col(UNFRAMED).isNull()).select(KIND, SCHEMA_ID).distinct().collect()
    return sorted((row[KIND], row[SCHEMA_ID]) for row in rows)


def fetch_schemas(
    keys: list[SchemaKey], lookup: SchemaLookup | None
) -> dict[SchemaKey, RegisteredSchema | str]:
    """Each key's schema from the registry, or why records of it have no id; on the driver."""
    found: dict[SchemaKey, RegisteredSchema | str] = {}
    for kind, schema_id in keys:
        if lookup is None:
            found[(kind, schema_id)] = framing.NO_REGISTRY
            continue
        try:
            found[(kind, schema_id)] = lookup.schema(schema_id, kind)
        except SchemaLookupError as error:
            # An event, not a crash: the records of this schema count as unidentified with
            # the reason, and the failure is told.
            log.warning("schema registry: %s id %d: %s", kind, schema_id, error)
            found[(kind, schema_id)] = framing.SCHEMA_PREFIX + error.reason
    return found


@functools.cache
def _registry(config: SchemaRegistryConfig) -> RegistrySchemas:
    # One fetcher per registry for the process: schemas are fetched once a run.
    return RegistrySchemas(config)


def registry_lookups(config: DgmConfig | None) -> Lookups:
    """Each topic's registry: [cluster.schema_registry] of the cluster the topic lives on."""

    def lookup(topic: str) -> SchemaLookup | None:
        if config is None:
            return None
        cluster, _ = split(topic, config.clusters)
        registry = config.cluster_config(cluster).schema_registry
        return None if registry is None else _registry(registry)

    return lookup


def no_lookups(topic: str) -> SchemaLookup | None:
    return None


def batch_schemas(
    records: DataFrame, rule: MessageIdRule, lookup: SchemaLookup | None
) -> Schemas | None:
    """For a registry_field rule, the schemas of the batch's records (a small job, then the
    fetches on the driver); None for the other kinds."""
    if rule.kind != "registry_field":
        return None
    return fetch_schemas(schema_keys(with_framing(records)), lookup)


def with_registry_id(
    framed: DataFrame, dotted: str, schemas: Schemas
) -> tuple[DataFrame, Column, Column]:
    """`framed` (with_framing's) with a decoded column per Avro schema, and the raw id and
    reason columns over it (message_id_columns applies the empty and length rules)."""
    framed, found = with_registry_ids(framed, [dotted], schemas)
    return framed, *found[dotted]


def with_registry_ids(
    framed: DataFrame, paths: list[str], schemas: Schemas
) -> tuple[DataFrame, dict[str, tuple[Column, Column]]]:
    """with_registry_id for several paths at once: two projections in all, not two a path."""
    decoded: dict[str, Column] = {}
    raw: dict[str, Column] = {}
    protobuf = _protobuf_columns(schemas, paths, decoded)
    for dotted in paths:
        suffix = dotted.encode().hex()  # unique per path
        found_id, reason = _path_columns(
            framed.sparkSession, dotted, suffix, schemas, decoded, protobuf
        )
        raw[f"_dgm_found_{suffix}"], raw[f"_dgm_why_{suffix}"] = found_id, reason
    # The id and reason as columns of a projection of their own: the rules after them read
    # the id several times, and an expression tree copied into each read grows past what
    # Spark compiles quickly (18 paths over 5 schemas took minutes to plan).
    framed = framed.withColumns(decoded) if decoded else framed
    framed = framed.withColumns(raw)
    unframed, found = F.col(UNFRAMED), {}
    for dotted in paths:
        suffix = dotted.encode().hex()
        found_id, reason = F.col(f"_dgm_found_{suffix}"), F.col(f"_dgm_why_{suffix}")
        found[dotted] = (
            F.when(unframed.isNull(), found_id),
            F.coalesce(unframed, F.when(found_id.isNull(), reason)),
        )
    return framed, found


def _protobuf_columns(
    schemas: Schemas, paths: list[str], decoded: dict[str, Column]
) -> dict[tuple[SchemaKey, str], tuple[Column, Column]]:
    """Each (Protobuf schema, path)'s raw id and reason: one decoded column for all of them
    (protobuf_columns.protobuf_ids), added to `decoded`."""
    wanted = {k: s for k, s in schemas.items() if not isinstance(s, str) and s.format == "PROTOBUF"}
    if not wanted:
        return {}
    shipped, refused = compiled(wanted)
    columns: dict[tuple[SchemaKey, str], tuple[Column, Column]] = {}
    for key, reason in refused.items():
        for dotted in paths:
            columns[(key, dotted)] = (F.lit(None).cast("string"), F.lit(reason))
    if shipped:
        match = F.lit(False)
        for kind, schema_id in shipped:
            match = match | ((F.col(KIND) == F.lit(kind)) & (F.col(SCHEMA_ID) == F.lit(schema_id)))
        found = protobuf_ids(shipped, paths, F.col(KIND), F.col(SCHEMA_ID), F.col(PAYLOAD))
        decoded[_PROTOBUF] = F.when(match, found)
        for key in shipped:
            for position, dotted in enumerate(paths):
                columns[(key, dotted)] = (
                    F.col(_PROTOBUF).getField(id_field(position)),
                    F.col(_PROTOBUF).getField(why_field(position)),
                )
    return columns


def _path_columns(
    spark: SparkSession,
    dotted: str,
    suffix: str,
    schemas: Schemas,
    decoded: dict[str, Column],
    protobuf: dict[tuple[SchemaKey, str], tuple[Column, Column]],
) -> tuple[Column, Column]:
    """The raw id and reason at `dotted`, a CASE over the schemas; adds to `decoded` the
    from_avro column of each Avro schema (`protobuf`: _protobuf_columns')."""
    cases: list[tuple[Column, Column, Column]] = []
    for index, (key, schema) in enumerate(sorted(schemas.items())):
        match = (F.col(KIND) == F.lit(key[0])) & (F.col(SCHEMA_ID) == F.lit(key[1]))
        if isinstance(schema, str):
            cases.append((match, F.lit(None).cast("string"), F.lit(schema)))
        elif schema.format == "JSON":
            cases.append((match, *json_id(F.col(PAYLOAD), "$." + dotted)))
        elif schema.format == "PROTOBUF":
            cases.append((match, *protobuf[(key, dotted)]))
        elif schema.format != "AVRO":
            cases.append((match, F.lit(None).cast("string"), F.lit(framing.FORMAT_UNSUPPORTED)))
        else:
            try:
                path = avro_path(schema, dotted)
            except SchemaUnreadable:
                path = None
            if path is None or not spark_reads(spark, path.decoding_text):
                cases.append((match, F.lit(None).cast("string"), F.lit(framing.SCHEMA_UNREADABLE)))
                continue
            name = _DECODED.format(f"{index}_{suffix}")
            decoded[name] = F.when(
                match, from_avro(F.col(PAYLOAD), path.decoding_text, _PERMISSIVE)
            )
            found, reason = _avro_id(path.node, F.col(name))
            # A malformed payload reads as a record of nulls (AvroPath.fields).
            unreadable = F.col(name).isNull()
            if path.fields:
                unreadable = unreadable | _all_null(F.col(name), path.fields)
            unreadable_reason = F.when(unreadable, F.lit(framing.PAYLOAD_UNREADABLE))
            cases.append((match, F.when(~unreadable, found), unreadable_reason.otherwise(reason)))
    found_id: Column = F.lit(None).cast("string")
    reason_col: Column = F.lit(framing.SCHEMA_PREFIX + "not fetched")
    for match, case_id, case_reason in reversed(cases):
        found_id = F.when(match, case_id).otherwise(found_id)
        reason_col = F.when(match, case_reason).otherwise(reason_col)
    return found_id, reason_col


_PERMISSIVE = {"mode": "PERMISSIVE"}
_READABLE: dict[str, bool] = {}  # by decoding text: Spark's answer never changes


def spark_reads(spark: SparkSession, text: str) -> bool:
    """Whether Spark's from_avro takes this schema: asked on the driver, over no rows, so a
    schema Spark refuses makes its records unidentified instead of failing the job."""
    if text not in _READABLE:
        probe = spark.range(0).select(F.lit(None).cast("binary").alias("payload"))
        try:
            _ = probe.select(from_avro(F.col("payload"), text, _PERMISSIVE)).schema
            _READABLE[text] = True
        except (PySparkException, Py4JError):
            _READABLE[text] = False
    return _READABLE[text]


def _all_null(record: Column, fields: tuple[str, ...]) -> Column:
    every = record.getField(fields[0]).isNull()
    for name in fields[1:]:
        every = every & record.getField(name).isNull()
    return every


def final_reason(found: Column, reason: Column) -> Column:
    """The reason beside message_id_columns.bounded(found): an empty id is none."""
    return F.when(found == F.lit(""), F.lit(framing.EMPTY_ID)).otherwise(reason)


def json_id(payload: Column, path: str) -> tuple[Column, Column]:
    """kind = json_field over a payload, with message_id_columns' types, and its reasons."""
    parsed = F.try_parse_json(payload.cast("string"))
    at = F.variant_get(parsed, path, "variant")
    kind = F.schema_of_variant(at)
    is_id = kind.isin(*JSON_ID_TYPES) | kind.rlike(JSON_ID_DECIMAL)
    reason = (
        F.when(parsed.isNull(), F.lit(framing.PAYLOAD_UNREADABLE))
        .when(at.isNull() | (kind == F.lit("VOID")), F.lit(framing.FIELD_MISSING))
        .when(~is_id, F.lit(framing.NOT_AN_ID))
    )
    return F.when(is_id, F.variant_get(parsed, path, "string")), reason


def _avro_id(node: Node, value: Column) -> tuple[Column, Column]:
    """The id `node` leads to in from_avro's value, and its reason; avro_id's twin."""
    if isinstance(node, Missing):
        return F.lit(None).cast("string"), F.lit(framing.FIELD_MISSING)
    if isinstance(node, Field):
        child = (
            F.try_element_at(value, F.lit(node.name)) if node.map_key else value.getField(node.name)
        )
        found, reason = _avro_id(node.child, child)
    elif isinstance(node, Union):
        found, reason = F.lit(None).cast("string"), F.lit(framing.PAYLOAD_UNREADABLE)
        for branch in reversed(node.branches):
            member = value.getField(f"member{branch.index}")
            branch_id, branch_reason = _avro_id(branch.child, member)
            found = F.when(member.isNotNull(), branch_id).otherwise(found)
            reason = F.when(member.isNotNull(), branch_reason).otherwise(reason)
    else:
        found, reason = _leaf(node, value)
    missing = value.isNull()
    return F.when(~missing, found), F.when(missing, F.lit(framing.FIELD_MISSING)).otherwise(reason)


def _leaf(leaf: Leaf, value: Column) -> tuple[Column, Column]:
    none = F.lit(None).cast("string")
    if leaf.id_type is None:
        return none, F.lit(framing.NOT_AN_ID)
    if leaf.id_type in ("text", "bytes"):
        # Read as a key is: UTF-8 as it is, anything else 0x<HEX> (hex of a string is of its
        # bytes, so an Avro string holding invalid UTF-8 reads like such a key).
        text = value.cast("string")
        found = F.when(F.is_valid_utf8(text), text).otherwise(
            F.concat(F.lit(HEX_PREFIX), F.hex(value))
        )
        return found, none
    return value.cast("string"), none  # integer, decimal of scale 0
