"""A few records read back from Kafka at their coordinates: what the duplicate story shows of
a copy's value on request (dashboard/panels/copy_values.py). Read uncommitted, so a copy in a
transaction still open is read too; a record retention or compaction removed is said to be
gone, never replaced by the next one."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from dgm.config.cluster import ClusterConfig


@dataclass(frozen=True)
class ReadRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RecordUnreadable(Exception):
    """The cluster did not hand the record over (unreachable, not authorized, timed out)."""


def read_records(
    cluster: ClusterConfig,
    topic: str,
    wanted: Sequence[tuple[int, int]],
    timeout_s: float = 10.0,
) -> dict[tuple[int, int], ReadRecord | None]:
    """The record at each (partition, offset) of `topic` on `cluster`; None where the log no
    longer holds that offset (retention, compaction, a transaction marker)."""
    if cluster.bootstrap_servers is None:
        raise RecordUnreadable("the cluster has no bootstrap_servers")
    settings = cluster.librdkafka_config(cluster.bootstrap_servers) | {
        "group.id": f"dgm-record-view-{uuid.uuid4().hex[:8]}",  # never committed
        "enable.auto.commit": False,
        "isolation.level": "read_uncommitted",
        "enable.partition.eof": True,
    }
    consumer = Consumer(settings)
    found: dict[tuple[int, int], ReadRecord | None] = {}
    try:
        for partition, offset in wanted:
            found[(partition, offset)] = _one(consumer, topic, partition, offset, timeout_s)
    except KafkaException as error:
        raise RecordUnreadable(str(error.args[0])) from error
    finally:
        consumer.close()
    return found


def _one(
    consumer: Consumer, topic: str, partition: int, offset: int, timeout_s: float
) -> ReadRecord | None:
    consumer.assign([TopicPartition(topic, partition, offset)])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(min(1.0, max(0.0, deadline - time.monotonic())))
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return None  # nothing at or after it: gone, or never there
            raise KafkaException(error)
        at = message.offset()
        if at is None or at < offset:
            continue
        if at > offset:
            return None  # removed: the log skips to the next record it holds
        raw = message.headers() or []
        headers = tuple((str(h[0]), h[1] if isinstance(h[1], bytes) else None) for h in raw)
        return ReadRecord(message.key(), message.value(), headers)
    raise RecordUnreadable(
        f"{topic}[{partition}] offset {offset} not read within {timeout_s:.0f} s"
    )
