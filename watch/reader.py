"""Reading one cluster's sink topics as a read_committed consumer does: from `lookback`
records before each partition's end, then on as records are committed. Partitions are
assigned by hand (no consumer group joins, nothing is committed), and partitions added to a
topic are picked up at the next refresh. A broker that goes away is librdkafka's to retry:
`read` then returns nothing until it is back."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

log = logging.getLogger("dgm.watch")

# What the watch asks of the consumer: it reads what a read_committed consumer of the sink
# sees (docs/design.md: a duplicate is a committed record), and leaves no trace in the
# cluster's groups.
CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "dgm-watch",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "isolation.level": "read_committed",
    "enable.partition.eof": False,
}
BATCH = 5_000
SAY_AGAIN_AFTER_S = 300.0  # one line per distinct error this often, not one per fetch


class SinkReader:
    """The committed records of `topics` (Kafka names) on one cluster."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        topics: Iterable[str],
        lookback: int,
        request_timeout_s: float = 10.0,
    ) -> None:
        self.topics = tuple(sorted(set(topics)))
        self.lookback = lookback
        self.request_timeout_s = request_timeout_s
        self.consumer = Consumer({**client_config, **CONSUMER_SETTINGS})
        self.assigned: set[tuple[str, int]] = set()
        self._said: dict[str, float] = {}

    def refresh(self) -> int:
        """Assign the partitions not read yet, each from `lookback` records before its end;
        how many were added. A topic that does not exist (yet) is tried again next time."""
        try:
            metadata = self.consumer.list_topics(timeout=self.request_timeout_s)
        except KafkaException as error:
            log.warning("cannot list topics (%s); retrying at the next refresh", error)
            return 0
        added = []
        for topic in self.topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                continue
            for partition in found.partitions:
                if (topic, partition) in self.assigned:
                    continue
                start = self._start(topic, partition)
                if start is None:
                    continue
                added.append(TopicPartition(topic, partition, start))
        if added:
            self.consumer.incremental_assign(added)
            self.assigned.update((tp.topic, tp.partition) for tp in added)
        return len(added)

    def _start(self, topic: str, partition: int) -> int | None:
        try:
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.request_timeout_s
            )
        except KafkaException as error:
            log.warning("no watermarks for %s/%d (%s); retrying later", topic, partition, error)
            return None
        return int(max(low, high - self.lookback))

    def read(self, timeout_s: float) -> list[Message]:
        """The records that arrived, up to BATCH; errors are logged, never raised."""
        if not self.assigned:
            return []
        records = []
        for message in self.consumer.consume(BATCH, timeout=timeout_s):
            error = message.error()
            if error is None:
                records.append(message)
            elif error.code() != KafkaError._PARTITION_EOF:
                self._warn(f"reading {message.topic()}/{message.partition()}: {error.str()}")
        return records

    def _warn(self, line: str) -> None:
        # librdkafka can repeat an error (a broker away) at every fetch; the watch reads on
        # meanwhile, and says so once in a while rather than at every fetch.
        now = time.monotonic()
        if now - self._said.get(line, float("-inf")) >= SAY_AGAIN_AFTER_S:
            self._said[line] = now
            log.warning("%s (said again in %.0f s if it persists)", line, SAY_AGAIN_AFTER_S)

    def behind(self) -> int:
        """Records between the read positions and the partitions' last known high
        watermarks (from the fetch responses, no request)."""
        if not self.assigned:
            return 0
        total = 0
        positions = self.consumer.position([TopicPartition(t, p) for t, p in sorted(self.assigned)])
        for position in positions:
            if position.offset < 0:
                continue
            _, high = self.consumer.get_watermark_offsets(position, cached=True)
            if high >= 0:
                total += max(0, high - position.offset)
        return total

    def close(self) -> None:
        self.consumer.close()
