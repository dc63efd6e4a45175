"""Avro records as a producer writes them, on a real broker through a real schema registry:
confluent-kafka's AvroSerializer frames two schema versions (v2 adds a field with a default);
the audit's fingerprints and the watch find the same ids, the ids the producer wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from dgm.clients.schema_registry import RegistrySchemas
from dgm.config.loader import load_config
from dgm.config.pipelines import MessageIdRule
from dgm.contracts import registry_framing as framing
from dgm.contracts.protobuf_ids import ProtobufDecoder, protobuf_decoder
from spark_jobs.audit.record_columns import fingerprints
from spark_jobs.audit.registry_columns import batch_schemas, registry_lookups
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.protobuf_classes import message_classes
from tests.support.schema_registry import RegistryUnderTest
from watch import ids
from watch.registry_ids import RegistryIds

V1: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "dgm.test",
    "fields": [
        {"name": "order", "type": {"type": "record", "name": "Ref", "fields": [
            {"name": "id", "type": ["null", "string"]},
        ]}},
        {"name": "amount", "type": "long"},
    ],
}  # fmt: skip
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string", "default": ""}]}
RULE = MessageIdRule("registry_field", "order.id")


def produce(kafka: KafkaUnderTest, registry: RegistryUnderTest, topic: str) -> list[str | None]:
    """v1 records, then v2 records (one written twice), one without an id, one not framed;
    the ids the producer meant, in offset order."""
    client = SchemaRegistryClient(registry.client_config())
    producer = Producer(kafka.client_config())
    sent: list[str | None] = []
    context = SerializationContext(topic, MessageField.VALUE)
    for version, schema in ((1, V1), (2, V2)):
        serialize = AvroSerializer(client, json.dumps(schema))
        for n in range(3):
            order_id = f"o-{version}-{n}"
            record = {
                "order": {"id": order_id},
                "amount": n,
                **({"note": "x"} if version == 2 else {}),
            }
            copies = 2 if (version, n) == (2, 0) else 1  # a duplicate
            for _ in range(copies):
                producer.produce(topic, serialize(record, context))
                sent.append(order_id)
        producer.produce(topic, serialize({"order": {"id": None}, "amount": 9}, context))
        sent.append(None)
    producer.produce(topic, b'{"order": {"id": "plain"}}')  # no registry framing
    sent.append(None)
    producer.flush(30)
    return sent


def test_the_audit_and_the_watch_read_avro_ids(
    spark: Any, kafka: KafkaUnderTest, schema_registry: RegistryUnderTest
) -> None:
    topic = kafka.new_topic("avro")
    sent = produce(kafka, schema_registry, topic)
    lookup = RegistrySchemas(schema_registry.dgm_config())

    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    schemas = batch_schemas(records, RULE, lookup)
    assert schemas is not None and len(schemas) == 2  # v1 and v2, each fetched once
    audited = fingerprints(records, RULE, schemas).orderBy("offset").collect()
    assert [row["message_id"] for row in audited] == sent

    consumer = Consumer(kafka.client_config(**{"group.id": topic, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    watched = RegistryIds(RegistrySchemas(schema_registry.dgm_config()))
    found: list[tuple[str | None, str | None]] = []
    try:
        while len(found) < len(sent):
            message = consumer.poll(10)
            assert message is not None, "the records were not read back"
            headers = cast(ids.Headers, message.headers())
            found.append(ids.identify(RULE, None, message.value(), headers, watched))
    finally:
        consumer.close()
    assert [f[0] for f in found] == sent
    assert [f[1] for f in found if f[0] is None] == [
        framing.FIELD_MISSING,
        framing.FIELD_MISSING,
        framing.NOT_FRAMED,
    ]
    assert watched.lookups == 2 and not watched.failures


def test_the_audit_and_the_watch_agree_on_protobuf_records(
    spark: Any, kafka: KafkaUnderTest, schema_registry: RegistryUnderTest
) -> None:
    """confluent-kafka's ProtobufSerializer (a reference, a nested message) to a real broker:
    the audit (in Spark's Python workers) and the watch find the ids the producer wrote, from
    the same registry, and the same reason where there is none."""
    topic = kafka.new_topic("protobuf")
    classes = message_classes()
    client = SchemaRegistryClient(schema_registry.client_config())
    context = SerializationContext(topic, MessageField.VALUE)
    config = {"use.deprecated.format": False}
    order_class, line_class = classes["dgm.test.Order"], classes["dgm.test.Order.Line"]
    order = ProtobufSerializer(order_class, client, config)
    line = ProtobufSerializer(line_class, client, config)
    producer = Producer(kafka.client_config())
    sent = [("o-1", "order.id"), ("o-2", "order.id"), (None, "order.id"), ("l-1", "id")]
    for wanted, path in sent:
        if path == "id":
            value = line(line_class(id=wanted), context)
        else:
            message = order_class(amount=1, **({"order": {"id": wanted}} if wanted else {}))
            value = order(message, context)
        producer.produce(topic, value)
    producer.flush(30)
    lookup = RegistrySchemas(schema_registry.dgm_config())

    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    schemas = batch_schemas(records, RULE, lookup)
    # Order and Line are messages of one file: one schema id, the indexes tell them apart.
    assert schemas is not None and len(schemas) == 1
    audited = fingerprints(records, RULE, schemas).orderBy("offset").collect()
    # The Line record has no `order`: field missing, as the order without one.
    by_rule = ["o-1", "o-2", None, None]
    assert [row["message_id"] for row in audited] == by_rule

    values = [row["value"] for row in records.orderBy("offset").collect()]
    watched = RegistryIds(lookup)
    assert [watched.find("order.id", bytes(v), None) for v in values] == [
        (found, None if found else framing.FIELD_MISSING) for found in by_rule
    ]
    found = []
    for value, (_, path) in zip(values, sent, strict=True):
        framed = framing.unframe(bytes(value), None)
        assert isinstance(framed, framing.Framed)
        decoder = protobuf_decoder(lookup.schema(framed.schema_id, framed.id_kind))
        assert isinstance(decoder, ProtobufDecoder)
        found.append(decoder.find(framed.payload, path)[0])
    assert found == [wanted for wanted, _ in sent]


def test_each_topic_takes_its_clusters_registry(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    path.write_text(
        '[cluster]\nbootstrap_servers = "localhost:9092"\n'
        '[cluster.schema_registry]\nurl = "http://registry.invalid:8081"\n'
        '[clusters.dr]\nbootstrap_servers = "localhost:9093"\n',
        encoding="utf-8",
    )
    lookups = registry_lookups(load_config(path))
    assert isinstance(lookups("orders"), RegistrySchemas)
    assert lookups("orders") is lookups("other")  # one fetcher, one cache, per registry
    assert lookups("dr/orders") is None  # a cluster without a registry
    assert registry_lookups(None)("orders") is None
