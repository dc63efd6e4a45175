"""Where a lab pipeline's source ends (LSO) and how far its consumer group has committed."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]


def source_lso(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    """Last stable offset per partition: where a read_committed reader can get to."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(topic, p): latest for p in range(partitions)}
    futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED)
    return {tp.partition: int(f.result(timeout=30).offset) for tp, f in futures.items()}


def group_offsets(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0}
