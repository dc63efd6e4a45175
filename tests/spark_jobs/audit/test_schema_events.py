"""A schema the registry does not give: the audit records the event once, counts the records
unidentified and carries on; a later fetch of the same schema for the topic restores it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from dgm.config.cluster import ClusterConfig
from dgm.config.pipelines import MessageIdRule
from dgm.contracts.registered_schemas import (
    SCHEMA_LOOKUP_FAILED,
    SCHEMA_LOOKUP_RESTORED,
    RegisteredSchema,
)
from dgm.contracts.samples import SampleStore
from spark_jobs.audit.audit import audit
from spark_jobs.audit.schema_events import SchemaEvents, failed_line, restored_line
from tests.support.audited_pipeline import config, pipeline, sample, seen
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.schema_registry import RegistryUnderTest

SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "dgm.test.events",
    "fields": [{"name": "id", "type": "string"}],
}
RULE = MessageIdRule("registry_field", "id")
UNKNOWN = 2_000_000_000  # a content id no registry of the tests hands out


def framed_with(schema_id: int) -> bytes:
    """Confluent's framing around a payload no schema is needed for: the id is what fails."""
    return b"\x00" + schema_id.to_bytes(4, "big") + b"\x02x"


def test_an_unknown_schema_is_an_event_once_and_its_records_unidentified(
    spark: Any, kafka: KafkaUnderTest, schema_registry: RegistryUnderTest, tmp_path: Path
) -> None:
    topic = kafka.new_topic("schema-events")
    sample(kafka, tmp_path, topic)
    client = SchemaRegistryClient(schema_registry.client_config())
    serialize = AvroSerializer(client, json.dumps(SCHEMA))
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer(kafka.client_config())
    for n in range(2):
        producer.produce(topic, serialize({"id": f"e-{n}"}, context))
    for _ in range(3):
        producer.produce(topic, framed_with(UNKNOWN))
    producer.flush(30)
    sample(kafka, tmp_path, topic)
    cluster = ClusterConfig(schema_registry=schema_registry.dgm_config())
    cfg = dataclasses.replace(config(tmp_path, pipeline(topic, message_id=RULE)), cluster=cluster)

    lines: list[str] = []
    first = audit(spark, cfg, kafka.bootstrap_servers, lines.append)
    producer.produce(topic, framed_with(UNKNOWN))
    producer.produce(topic, b"not framed")
    producer.flush(30)
    sample(kafka, tmp_path, topic)
    second = audit(spark, cfg, kafka.bootstrap_servers, lines.append)

    assert (first.records, second.records) == ({topic: 5}, {topic: 2})  # no crash, no drop
    counted = [line for line in lines if "unidentified" in line]
    assert counted == [
        f"audit: topic {topic}: 3 records unidentified: 3 schema not found",
        f"audit: topic {topic}: 2 records unidentified: 1 not framed, 1 schema not found",
    ]
    assert [(offset, found) for offset, found, _ in seen(spark, tmp_path)] == [
        (0, "e-0"),
        (1, "e-1"),
        (2, None),
        (3, None),
        (4, None),
        (5, None),
        (6, None),
    ]
    events = SampleStore(tmp_path).read("events").to_pylist()
    told = [
        (e["event"], e["detail"], e["topic"]) for e in events if e["event"].startswith("schema")
    ]
    detail = failed_line((topic, "content", UNKNOWN), "default", "not found")
    assert told == [(SCHEMA_LOOKUP_FAILED, detail, topic)]  # once, not once a batch
    assert detail == (
        f"cannot read the schema {UNKNOWN} (content id) of topic {topic} "
        "from the schema registry of cluster default: not found"
    )


def test_a_schema_fetched_again_restores_only_the_topics_holding_it(
    spark: Any, tmp_path: Path
) -> None:
    rows: list[tuple[str, bytes, list[Any]]] = [
        ("a", framed_with(7), []),
        ("b", framed_with(8), []),
    ]
    records = spark.createDataFrame(
        rows, "topic string, value binary, headers array<struct<key:string,value:binary>>"
    )
    schema = RegisteredSchema(7, "AVRO", json.dumps(SCHEMA))
    events = SchemaEvents(tmp_path, ())
    failed = events.told(records, ["a", "b"], {("content", 7): "schema unreachable"})
    assert failed == [failed_line(("a", "content", 7), "default", "unreachable")]
    assert events.told(records, ["a", "b"], {("content", 7): "schema unreachable"}) == []
    # A new run reads what was recorded: the restore is told once, for the topic that failed.
    again = SchemaEvents(tmp_path, ())
    restored = again.told(records, ["a", "b"], {("content", 7): schema})
    assert restored == [restored_line(("a", "content", 7), "default")]
    assert again.told(records, ["a", "b"], {("content", 7): schema}) == []
    stored = SampleStore(tmp_path).read("events").to_pylist()
    assert [(e["event"], e["topic"]) for e in stored] == [
        (SCHEMA_LOOKUP_FAILED, "a"),
        (SCHEMA_LOOKUP_RESTORED, "a"),
    ]
