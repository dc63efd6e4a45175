"""An independent read of topics framed for a schema registry (Avro, JSON Schema): every record
decoded with confluent-kafka's own deserializer (what consumers use), not with dgm's readers."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from dgm.util.waiting import wait_until
from lab.registry_relay.schemas import Format, deserializer


@dataclass(frozen=True)
class RegistryRecord:
    partition: int
    offset: int
    schema_id: int  # the Confluent framing's id
    value: dict[str, object]


def read_registry_topic(
    bootstrap: str, registry_url: str, topic: str, partitions: int, form: Format = "avro"
) -> list[RegistryRecord]:
    """Every committed record of `topic`, decoded, to its end."""
    decode = deserializer(form, SchemaRegistryClient({"url": registry_url}), None)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"registry-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: list[RegistryRecord] = []
    ended: set[int] = set()

    def read() -> bool:
        for message in consumer.consume(500, 0.5):
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition() or 0)
                continue
            assert error is None, error
            raw, partition, offset = message.value(), message.partition(), message.offset()
            assert raw is not None and partition is not None and offset is not None
            value = decode(raw, SerializationContext(topic, MessageField.VALUE))
            schema_id = int.from_bytes(raw[1:5], "big")
            found.append(RegistryRecord(partition, offset, schema_id, value))
        return len(ended) == partitions

    try:
        wait_until(read, 120, f"the end of {topic}", 0)
    finally:
        consumer.close()
    return found


def copies_by_id(records: list[RegistryRecord], field: str) -> Counter[str]:
    return Counter(str(r.value[field]) for r in records)
