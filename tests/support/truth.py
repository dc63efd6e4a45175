"""The truth about lab topics, read without dgm's analysis: a plain confluent-kafka read of
every record (read_committed for what a downstream consumer sees, read_uncommitted for what
the log holds), counted by the ids dgm stamps."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, TopicPartition

from dgm.contracts.headers import ID, PRODUCER, SEQ, SRC, header_map
from dgm.util.waiting import wait_until


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


def read_headers(
    bootstrap_servers: str, topic: str, isolation: str = "read_committed"
) -> list[dict[str, bytes]]:
    """The headers of every record a consumer with `isolation` reads in `topic`, to its end."""
    return [record.headers for record in read_records(bootstrap_servers, topic, isolation)]


def topic_ids(
    kafka: Any, topic: str, isolation: str = "read_committed"
) -> Counter[tuple[str, str]]:
    """(dgm-id, dgm-src) -> copies, for every record a consumer with `isolation` reads."""
    seen: Counter[tuple[str, str]] = Counter()
    for headers in read_headers(kafka.bootstrap_servers, topic, isolation):
        src = headers.get(SRC)
        seen[(headers[ID].decode(), src.decode() if src else "")] += 1
    return seen


def by_id(copies: Counter[tuple[str, str]]) -> Counter[str]:
    ids: Counter[str] = Counter()
    for (message_id, _), count in copies.items():
        ids[message_id] += count
    return ids


def extra_copies(ids: Counter[str]) -> int:
    return sum(ids.values()) - len(ids)


def _behind(records: list[Record], stream: Any, position: Any) -> list[Record]:
    """The records (each partition read in offset order) whose position is below the highest
    position a record of the same partition and stream holds at a lower offset."""
    highest: dict[tuple[int, Any], int] = {}
    behind = []
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        key, at = (record.partition, stream(record)), position(record)
        if key[1] is None or at is None:
            continue
        if at < highest.get(key, at):
            behind.append(record)
        highest[key] = max(at, highest.get(key, at))
    return behind


def producer_out_of_order(records: list[Record]) -> list[Record]:
    """Records whose dgm-seq is below one their producer session wrote at a lower offset of
    the same partition (docs/design.md, "out of order")."""

    def seq(r: Record) -> int | None:
        raw = r.headers.get(SEQ)
        return int(raw) if raw is not None and raw.isdigit() else None

    return _behind(records, lambda r: r.headers.get(PRODUCER), seq)


def sink_out_of_order(records: list[Record]) -> list[Record]:
    """Sink records whose dgm-src offset is below that of a record from the same source
    partition at a lower offset of the same sink partition."""

    def source_partition(r: Record) -> str | None:
        src = r.headers.get(SRC)
        return src.decode().rsplit("/", 1)[0] if src else None

    def source_offset(r: Record) -> int | None:
        src = r.headers.get(SRC)
        return int(src.decode().rsplit("/", 1)[1]) if src else None

    return _behind(records, source_partition, source_offset)


def sequence_gaps(records: list[Record]) -> int:
    """Records missing from the producer sessions' dgm-seq runs, per partition, between a
    session's lowest and highest seq (docs/design.md, "lost", cause sequence gap). `records`
    read with read_uncommitted: an aborted record was written, so it is no gap."""
    seqs: dict[tuple[bytes, int], set[int]] = {}
    for r in records:
        producer, seq = r.headers.get(PRODUCER), r.headers.get(SEQ)
        if producer is not None and seq is not None:
            seqs.setdefault((producer, r.partition), set()).add(int(seq))
    return sum(max(s) - min(s) + 1 - len(s) for s in seqs.values())
