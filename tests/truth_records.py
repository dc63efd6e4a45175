"""The truth about pipelines that filter, re-key or keep no offsets in Kafka: a plain
confluent-kafka read of every record of the source and the sink (read_committed), without dgm's
analysis and without the lab's own accounting, recomputing the application's declared rule."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, TopicPartition

from dgm.headers import ID, header_map
from dgm.waiting import wait_until


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]
    timestamp_ms: int | None = None  # the Kafka timestamp (None when the record has none)

    @property
    def header_id(self) -> str:
        return self.headers[ID].decode()


def read_records(
    bootstrap_servers: str, topic: str, isolation: str = "read_committed"
) -> list[Record]:
    """Every record a consumer with `isolation` reads in `topic`, to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"truth-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    partitions = [TopicPartition(topic, p, 0) for p in metadata.partitions]
    consumer.assign(partitions)
    ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions}
    records: list[Record] = []

    def at_end() -> bool:
        for message in consumer.consume(500, 0.2):
            assert message.error() is None, message.error()
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            headers = header_map(message.headers())
            kind, stamp = message.timestamp()
            at = None if kind == TIMESTAMP_NOT_AVAILABLE else stamp
            records.append(Record(partition, offset, message.key(), message.value(), headers, at))
        positions = consumer.position([TopicPartition(topic, p) for p in ends])
        return all(tp.offset >= ends[tp.partition] for tp in positions)

    try:
        wait_until(at_end, 60, f"reading {topic} to its end", interval=0)
    finally:
        consumer.close()
    return records


def dropped_by_rule(record: Record) -> bool:
    """The Streams application's declared filter, recomputed: a JSON value whose integer "n"
    is a multiple of ten is not delivered."""
    try:
        value = json.loads(record.value or b"")
    except ValueError:
        return False
    n = value.get("n") if isinstance(value, dict) else None
    return isinstance(n, int) and not isinstance(n, bool) and n % 10 == 0


@dataclass(frozen=True)
class Delivery:
    """What a pipeline delivered: source ids by the dgm-id header, sink ids by `sink_id`."""

    source: int  # committed source records
    expected: frozenset[str]  # source ids the pipeline is meant to deliver
    dropped: frozenset[str]  # source ids its declared rule excludes
    sink_copies: Counter[str]  # sink id -> copies

    @property
    def lost(self) -> frozenset[str]:
        return self.expected - set(self.sink_copies)

    @property
    def duplicates(self) -> int:
        """Extra copies of expected ids in the sink."""
        return sum(n - 1 for i, n in self.sink_copies.items() if i in self.expected)

    @property
    def unexpected(self) -> frozenset[str]:
        """Sink ids that are no expected source id (a dropped record let through, or junk)."""
        return frozenset(self.sink_copies) - self.expected


def delivery(
    source: list[Record], sink: list[Record], sink_by_key: bool, filtered: bool
) -> Delivery:
    dropped = {r.header_id for r in source if filtered and dropped_by_rule(r)}
    expected = {r.header_id for r in source} - dropped
    copies: Counter[str] = Counter(
        (r.key or b"").decode() if sink_by_key else r.header_id for r in sink
    )
    return Delivery(len(source), frozenset(expected), frozenset(dropped), copies)
