"""Where a lab pipeline's source ends (LSO), what its log holds (high watermark), and how far its
consumer group has committed."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]


def source_lso(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    """Last stable offset per partition: where a read_committed reader can get to."""
    return _latest(admin, topic, partitions, IsolationLevel.READ_COMMITTED)


def high_watermarks(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    """High watermark per partition (read_uncommitted latest): what the log holds."""
    return _latest(admin, topic, partitions, IsolationLevel.READ_UNCOMMITTED)


def no_open_transaction(admin: AdminClient, topic: str, partitions: int) -> bool:
    """Whether the LSO is the high watermark on every partition of `topic`."""
    return source_lso(admin, topic, partitions) == high_watermarks(admin, topic, partitions)


def group_offsets(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0}


def group_behind(admin: AdminClient, group: str, topic: str, partitions: int) -> int:
    """Records of `topic` below its LSO that `group` has not committed."""
    lso = source_lso(admin, topic, partitions)
    committed = group_offsets(admin, group, topic, partitions)
    return sum(max(0, end - committed.get(p, 0)) for p, end in lso.items())


def _latest(
    admin: AdminClient, topic: str, partitions: int, isolation: IsolationLevel
) -> dict[int, int]:
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(topic, p): latest for p in range(partitions)}
    futures = admin.list_offsets(request, isolation_level=isolation)
    return {tp.partition: int(f.result(timeout=30).offset) for tp, f in futures.items()}
