"""Authorization failures: told apart from outages, and the calls that try each permission.

A call the cluster refuses for want of a permission is not an outage: retrying cannot fix it,
and what it hides (a topic, a group, its transactions) must be said, not silently left out.
The samplers hand such refusals to the cycle as `Denial`s (dgm.clients.permissions), which records
them as events; `dgm check` makes one call per permission of the ACL table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import kafka.errors as kafka_errors
from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as PythonTopicPartition  # confluent-kafka has one too

from dgm.clients.permissions import (
    CLUSTER_DESCRIBE_CONFIGS,
    GROUP_DESCRIBE,
    TOPIC_DESCRIBE,
    TOPIC_READ,
    Denial,
)
from dgm.util.waiting import next_delay

# librdkafka's codes and kafka-python's classes for the four authorization failures.
LIBRDKAFKA_DENIED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
KAFKA_PYTHON_DENIED = (
    kafka_errors.TopicAuthorizationFailedError,
    kafka_errors.GroupAuthorizationFailedError,
    kafka_errors.ClusterAuthorizationFailedError,
    kafka_errors.TransactionalIdAuthorizationFailedError,
)


def is_denied(error: BaseException) -> bool:
    """Whether `error` (either client's) is one of the four authorization failures."""
    if isinstance(error, KafkaException):
        return bool(error.args) and _code(error.args[0]) in LIBRDKAFKA_DENIED
    return isinstance(error, KAFKA_PYTHON_DENIED)


def _code(error: Any) -> int | None:
    return error.code() if isinstance(error, KafkaError) else None


def undescribable_topics(admin: AdminClient, topics: Sequence[str], timeout_s: float) -> list[str]:
    """Of `topics`, those the cluster refuses to describe (TOPIC_AUTHORIZATION_FAILED).
    A listing of every topic leaves them out without a word; named, they are refused. A topic
    that does not exist is not among them (unless Describe is missing: Kafka hides it then)."""
    if not topics:
        return []
    try:
        futures = admin.describe_topics(TopicCollection(list(topics)), request_timeout=timeout_s)
    except KafkaException:
        return []
    refused = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s + 5)
        except KafkaException as error:
            if _code(error.args[0]) == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                refused.append(name)
        except TimeoutError:
            continue
    return sorted(refused)


def check_topic_describe(admin: AdminClient, topic: str, timeout_s: float) -> Denial | None:
    """Describe on `topic`: its metadata by name. KafkaException when it does not answer."""
    futures = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout_s)
    try:
        futures[topic].result(timeout=timeout_s + 5)
    except KafkaException as error:
        if is_denied(error):
            return Denial(TOPIC_DESCRIBE, topic)
        raise
    return None


def check_topic_read(
    python_admin: Any, admin: AdminClient, topic: str, timeout_s: float
) -> Denial | None:
    """Read on `topic`: DescribeProducers of its partitions (kafka-python), which needs it."""
    metadata = admin.list_topics(topic, timeout=timeout_s).topics[topic]
    if metadata.error is not None:
        raise KafkaException(metadata.error)
    by_leader: dict[int, list[Any]] = {}
    for number, partition in metadata.partitions.items():
        by_leader.setdefault(partition.leader, []).append(PythonTopicPartition(topic, number))
    for leader, partitions in sorted(by_leader.items()):
        try:
            python_admin.describe_producers(partitions, broker_id=leader)
        except kafka_errors.TopicAuthorizationFailedError:
            return Denial(TOPIC_READ, topic)
    return None


def check_group_describe(python_admin: Any, group: str, timeout_s: float) -> Denial | None:
    """Describe on `group`: its committed offsets (OffsetFetch, kafka-python). A retriable
    error (a young cluster's coordinator not ready yet) is retried until `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    delay = None
    while True:
        try:
            python_admin.list_group_offsets({group: None})
        except kafka_errors.GroupAuthorizationFailedError:
            return Denial(GROUP_DESCRIBE, group)
        except kafka_errors.KafkaError as error:
            if not error.retriable or time.monotonic() >= deadline:
                raise
            delay = next_delay(delay, 0.1, 1.0)
            time.sleep(delay)
            continue
        return None


def visible_transactional_ids(python_admin: Any) -> int:
    """How many transactional ids ListTransactions shows: only those dgm may describe, so a
    missing permission hides ids instead of failing."""
    return sum(len(found) for found in python_admin.list_transactions().values())


def check_cluster_describe_configs(
    admin: AdminClient, broker_id: int, timeout_s: float
) -> Denial | None:
    """DescribeConfigs on the cluster: one broker's configuration."""
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    try:
        admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(
            timeout=timeout_s + 5
        )
    except KafkaException as error:
        if is_denied(error):
            return Denial(CLUSTER_DESCRIBE_CONFIGS)
        raise
    return None


def check_offsets_for_times(client: dict[str, Any], topic: str, timeout_s: float) -> Denial | None:
    """analysis.start as a duration: ListOffsets by timestamp through a consumer that never
    joins its group (the audit's own lookup, spark_jobs.audit.start)."""
    from confluent_kafka import Consumer

    consumer = Consumer({**client, "group.id": "dgm-audit-start", "enable.auto.commit": False})
    try:
        answered = consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=timeout_s)
    except KafkaException as error:
        if is_denied(error):
            return Denial(TOPIC_DESCRIBE, topic)
        raise
    finally:
        consumer.close()
    for tp in answered:
        if tp.error is not None and _code(tp.error) in LIBRDKAFKA_DENIED:
            return Denial(TOPIC_DESCRIBE, topic)
    return None
