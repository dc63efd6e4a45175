"""Where the first audit of a topic-partition starts (`analysis.start`).

"earliest": the log start offset (no first start; ranges.plan_ranges' default). "latest": the
LSO sampled when the partition is first seen. A duration: the first offset whose Kafka
timestamp is >= now - duration, found with Kafka's offsets-for-times lookup (ListOffsets by
timestamp); a partition with no record that recent starts at its sampled LSO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from dgm.config.analysis import audit_start
from dgm.contracts.samples import Key, PartitionOffsets
from dgm.util.errors import UserFacingError

# Timestamps (epoch ms) per partition -> the first offset at or after each; -1 when none is.
OffsetsForTimes = Callable[[Mapping[Key, int]], dict[Key, int]]
LOOKUP_TIMEOUT_S = 30.0


def first_starts(
    setting: str,
    sampled: Iterable[PartitionOffsets],
    audited: Mapping[Key, int],
    now: datetime,
    offsets_for_times: OffsetsForTimes,
) -> dict[Key, int]:
    """The start offset of every sampled partition not audited yet, per `analysis.start`."""
    start = audit_start(setting)
    fresh = {(s.topic, s.partition): s for s in sampled if (s.topic, s.partition) not in audited}
    if start == "earliest" or not fresh:
        return {}
    if start == "latest":
        return {key: s.lso for key, s in fresh.items()}
    since_ms = int((now - start).timestamp() * 1000)
    found = offsets_for_times(dict.fromkeys(fresh, since_ms))
    return {key: s.lso if found.get(key, -1) < 0 else found[key] for key, s in fresh.items()}


def kafka_offsets_for_times(client: Mapping[str, Any]) -> OffsetsForTimes:
    """A lookup through a short-lived librdkafka consumer with the cluster's settings."""

    def lookup(times: Mapping[Key, int]) -> dict[Key, int]:
        consumer = Consumer({**client, "group.id": "dgm-audit-start", "enable.auto.commit": False})
        try:
            asked = [TopicPartition(t, p, ms) for (t, p), ms in sorted(times.items())]
            answered = consumer.offsets_for_times(asked, timeout=LOOKUP_TIMEOUT_S)
        except Exception as error:  # KafkaException: name the setting, not the client config
            raise UserFacingError(
                f"analysis.start: could not look up offsets by timestamp: {error}"
            ) from error
        finally:
            consumer.close()
        for tp in answered:
            if tp.error is not None:
                raise UserFacingError(
                    f"analysis.start: offsets by timestamp of {tp.topic}[{tp.partition}]: "
                    f"{tp.error}"
                )
        return {(tp.topic, tp.partition): tp.offset for tp in answered}

    return lookup
