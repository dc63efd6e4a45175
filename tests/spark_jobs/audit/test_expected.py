"""The `expected` predicates in the audit: checked by Spark before anything is read, evaluated
into each fingerprint (NULL as undecided, never a failed audit), and a changed predicate
found from the batches' manifests."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro
import pytest

from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.config.problems import ConfigError
from dgm.contracts.registered_schemas import IdKind, RegisteredSchema, SchemaLookupError
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.expected import (
    KAFKA_SOURCE,
    check_predicates,
    recorded_predicates,
    stale_topics,
    with_expected,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def config(*expected: str) -> DgmConfig:
    pipelines = tuple(
        PipelineConfig(
            name=f"p{n}",
            source_topics=("s",),
            sink_topics=(f"k{n}",),
            consumer_group="g",
            declared_semantic="exactly-once",
            expected=e,
        )
        for n, e in enumerate(expected)
    )
    return DgmConfig(source=Path("dgm.toml"), pipelines=pipelines)


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ("valu IS NOT NULL", r"pipelines\[1\]\.expected \(pipeline 'p1'\): not a Spark SQL"),
        ("value IS NOT NULL AND (", r"pipelines\[1\]\.expected \(pipeline 'p1'\): not a Spark SQL"),
        ("CAST(value AS STRING)", r"pipelines\[1\]\.expected .*got an expression of type string"),
    ],
)
def test_a_predicate_spark_cannot_use_is_a_config_error_naming_pipeline_and_key(
    spark: Any, predicate: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_predicates(spark, config("", predicate))


def test_records_are_marked_filtered_or_undecided_and_a_bad_cast_is_undecided(
    spark: Any,
) -> None:
    drops_tenths = "CAST(get_json_object(CAST(value AS STRING), '$.n') AS INT) % 10 != 0"
    cfg = config(drops_tenths, "key IS NOT NULL")
    check_predicates(spark, cfg)
    values = [b'{"n": 10}', b'{"n": 3}', b'{"n": "x"}', b"{broken", None]
    rows: list[tuple[Any, ...]] = [
        (None if n % 2 else b"k", v, "s", 0, n, T0, 0, []) for n, v in enumerate(values)
    ]
    rows.append((None, b'{"n": 10}', "k0", 0, 9, T0, 0, []))  # a sink record: no predicate
    marked = with_expected(spark.createDataFrame(rows, KAFKA_SOURCE), cfg)
    found = [
        (r["filtered_by"], r["filter_undecided_by"]) for r in marked.orderBy("offset").collect()
    ]
    assert found[:5] == [
        (["p0"], None),
        (["p1"], None),  # no key
        (None, ["p0"]),  # "x" is no number: NULL under the predicate, not a failed cast
        (["p1"], ["p0"]),  # broken JSON: undecided for p0; no key: filtered by p1
        (None, ["p0"]),  # no value
    ]
    assert found[5] == (None, None)


def test_a_changed_or_new_predicate_makes_its_source_topics_stale(tmp_path: Path) -> None:
    ranges = [{"topic": "s", "partition": 0, "start": 0, "end": 5}]
    old = Batch(tmp_path / "a", {"ranges": ranges})  # written before predicates were recorded
    marked = Batch(tmp_path / "b", {"ranges": ranges, "expected": {"p0": "x = 1"}})
    assert stale_topics(config(""), [old]) == {}
    assert stale_topics(config("x = 1"), [old]) == {"s": {"p0"}}
    assert stale_topics(config("x = 1"), [marked]) == {}
    assert stale_topics(config("x = 2"), [marked]) == {"s": {"p0"}}
    assert recorded_predicates(config("x = 1 ", ""), {"s"}) == {"p0": "x = 1", "p1": ""}
    assert recorded_predicates(config("x = 1"), {"other"}) == {}


EVENT_AVRO = {
    "type": "record",
    "name": "Event",
    "fields": [{"name": "type", "type": "string"}, {"name": "n", "type": "long"}],
}
EVENT_PROTO = 'syntax = "proto3";\nmessage Event { string type = 1; int64 n = 2; }\n'
EVENT_SCHEMAS = {
    1: RegisteredSchema(1, "AVRO", json.dumps(EVENT_AVRO)),
    2: RegisteredSchema(2, "JSON", '{"type": "object"}'),
    3: RegisteredSchema(3, "PROTOBUF", EVENT_PROTO),
}


class EventSchemas:
    """The schemas above by content id, as a registry gives them (the real registry's
    answers are tests/dgm/clients/test_schema_registry.py's)."""

    def schema(self, schema_id: int, id_kind: IdKind = "content") -> RegisteredSchema:
        if id_kind != "content" or schema_id not in EVENT_SCHEMAS:
            raise SchemaLookupError("not found", f"{id_kind} id {schema_id}")
        return EVENT_SCHEMAS[schema_id]


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def avro_event(kind: str) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(EVENT_AVRO), {"type": kind, "n": 1})
    return framed(1, out.getvalue())


def protobuf_event(kind: str) -> bytes:
    # Message indexes [0] (one 0 byte), then field 1 (string) `kind`.
    return framed(3, b"\x00" + b"\x0a" + bytes([len(kind)]) + kind.encode())


def test_a_predicate_reads_decoded_fields_whatever_the_records_format(spark: Any) -> None:
    no_heartbeats = "variant_get(fields, '$.type', 'string') != 'heartbeat'"
    cfg = config(no_heartbeats)
    check_predicates(spark, cfg)
    values = [
        avro_event("heartbeat"),
        avro_event("order"),
        framed(2, b'{"type": "heartbeat"}'),  # JSON Schema
        protobuf_event("heartbeat"),
        protobuf_event("order"),
        b'{"type": "heartbeat"}',  # plain JSON, not framed
        b"hello",  # neither framed nor JSON: no fields
        framed(9, b"\x02x"),  # a schema the registry does not have
        framed(3, b"\x00\x0a\x09"),  # Protobuf cut short
    ]
    rows: list[tuple[Any, ...]] = [(b"k", v, "s", 0, n, T0, 0, []) for n, v in enumerate(values)]
    marked = with_expected(spark.createDataFrame(rows, KAFKA_SOURCE), cfg, EventSchemas())
    assert "fields" not in marked.columns
    found = [
        (r["filtered_by"], r["filter_undecided_by"]) for r in marked.orderBy("offset").collect()
    ]
    filtered, kept, undecided = (["p0"], None), (None, None), (None, ["p0"])
    assert found == [
        filtered, kept, filtered, filtered, kept, filtered, undecided, undecided, undecided,
    ]  # fmt: skip
