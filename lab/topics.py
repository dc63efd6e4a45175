"""Create topics and wait until every broker serves them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from dgm.util.waiting import wait_until


def create_topic(
    admin: AdminClient,
    name: str,
    partitions: int = 1,
    replication_factor: int = -1,  # -1: the broker's default.replication.factor
    config: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    replicas: Sequence[Sequence[int]] | None = None,  # broker ids per partition, leader first
) -> str:
    if replicas is None:
        new = NewTopic(name, partitions, replication_factor, config=dict(config or {}))
    else:  # the client refuses a replication factor beside an assignment
        assignment = [list(r) for r in replicas]
        partitions = len(assignment)
        new = NewTopic(name, partitions, replica_assignment=assignment, config=dict(config or {}))
    futures = admin.create_topics([new], operation_timeout=timeout)
    futures[name].result(timeout=timeout)

    def served() -> bool:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        return bool(
            topic is not None
            and topic.error is None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
            and answers_list_offsets()
        )

    def answers_list_offsets() -> bool:
        # Metadata comes from any broker; under KRaft the leader may apply the new partition
        # a moment later and answer UNKNOWN_TOPIC_OR_PARTITION until then.
        wanted = {TopicPartition(name, p): OffsetSpec.latest() for p in range(partitions)}  # type: ignore[no-untyped-call]
        try:
            for future in admin.list_offsets(wanted, request_timeout=5).values():
                future.result(timeout=10)
        except KafkaException:
            return False
        return True

    wait_until(served, timeout, f"topic {name} to have a leader on every partition")
    return name
