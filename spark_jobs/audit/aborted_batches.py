"""The aborted records of a transactional topic's offset ranges, told by the log's record
batch headers instead of a second, read_committed read of every record (bench/HISTORY.md,
"Transactional topics: the markers instead of a second read").

Kafka writes a transaction's records in batches that carry the producer id and a
`transactional` flag, and ends the transaction on each partition with a control batch (a
marker) whose one record says COMMIT or ABORT (docs: kafka.apache.org/documentation,
"Control Batches"). A producer's transactional batches on a partition, up to its next marker
there, are one transaction: a read_committed consumer skips them iff that marker is ABORT.
The walk fetches each range's raw batches and reads their headers only, never their records.

Below a range's end (the sampled LSO, ranges.py) every transaction is decided, but a decided
transaction's marker may sit past the end, behind another producer's open one: the walk reads
on past the end until every in-range batch's marker is seen. When it cannot tell (the marker
not found below the high watermark, the log gone under it, the cluster not answering), the
topic is read a second time, read_committed, as before: the walk only ever saves time.

kafka-python is the one Python client that hands back record batches: confluent-kafka
(librdkafka) decodes them into messages and drops the markers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer import FetchRequest
from kafka.record import MemoryRecords

from dgm.clients.kafka_python import kafka_python_config, scrub
from dgm.contracts.clusters import split
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.ranges import OffsetRange

log = logging.getLogger(__name__)

# One partition per Fetch; a response holds up to this much. A batch larger than it (a
# broker's message.max.bytes above it) is fetched whole anyway: Kafka returns the first batch
# of a partition even past the limit (KIP-74).
FETCH_BYTES = 16 << 20
# Fetch v12 is the newest that names topics (v13 names them by id); Kafka 4 serves v4-v17.
FETCH_VERSION = 12
REQUEST_TIMEOUT_S = 30.0
ABORT = 0  # a control record's type: 0 abort, 1 commit
LOG_APPEND_TIME = 1  # a batch's timestamp type: 0 CreateTime, 1 LogAppendTime
# Per partition: the aborted spans (first, last offset, inclusive).
Spans = dict[int, list[tuple[int, int]]]


@dataclass(frozen=True)
class BatchHeader:
    """What the walk needs of one record batch: its offsets, producer and kind. `marker` is
    the control record's type (ABORT or commit) for a control batch, else None. The producer
    session (epoch) and first sequence, -1 when the batch has none, and whether the broker
    stamped its timestamps (LogAppendTime) tell who wrote a copy (copy_producers.py)."""

    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    marker: int | None = None
    producer_epoch: int = -1
    base_sequence: int = -1
    log_append_time: bool = False


@dataclass
class PartitionWalk:
    """The aborted spans of [start, end) on one partition, batch by batch in offset order."""

    start: int
    end: int
    # Per producer: the in-range spans of its transaction not yet ended by a marker.
    undecided: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    aborted: list[tuple[int, int]] = field(default_factory=list)

    def add(self, batch: BatchHeader) -> None:
        if batch.marker is not None:
            spans = self.undecided.pop(batch.producer_id, [])
            if batch.marker == ABORT:
                self.aborted.extend(spans)
        elif (
            batch.transactional and batch.last_offset >= self.start and batch.base_offset < self.end
        ):
            span = (max(batch.base_offset, self.start), min(batch.last_offset, self.end - 1))
            self.undecided.setdefault(batch.producer_id, []).append(span)

    def decided(self, position: int) -> bool:
        """Whether every in-range record's fate is known once the walk has read to `position`."""
        return position >= self.end and not self.undecided


def batch_headers(records: bytes) -> Iterator[BatchHeader]:
    """The headers of the whole batches in a Fetch response's `records`, in order."""
    batches = MemoryRecords(records)
    batch = batches.next_batch()
    while batch is not None:
        # kafka-python: 0 CreateTime, 1 LogAppendTime, None for magic 0 (no timestamps)
        log_append_time = batch.timestamp_type == LOG_APPEND_TIME
        if batch.magic < 2:  # the old formats have no producer ids, so no transactions
            yield BatchHeader(
                batch.base_offset, batch.last_offset, -1, False, log_append_time=log_append_time
            )
        else:
            marker = None
            if batch.is_control_batch:
                marker = next(iter(batch)).type
            yield BatchHeader(
                batch.base_offset, batch.last_offset, batch.producer_id,
                batch.is_transactional, marker, batch.producer_epoch, batch.base_sequence,
                log_append_time,
            )  # fmt: skip
        batch = batches.next_batch()


class UntoldAborts(Exception):
    """The walk could not tell a range's aborted records; the topic is read twice instead."""


class FetchError(UntoldAborts):
    """A Fetch the broker answered with an error: `error_code` tells a log start moved past
    the offset (OFFSET_OUT_OF_RANGE) from the rest."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


class MarkerWalker:
    """Walks the ranges of one cluster with one kafka-python admin client."""

    def __init__(
        self, settings: Mapping[str, Any], request_timeout_s: float = REQUEST_TIMEOUT_S
    ) -> None:
        config = kafka_python_config(settings, request_timeout_s, client_id="dgm-audit")
        self.admin = KafkaAdminClient(**config)
        self.leaders: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        self.admin.close()

    def leader(self, topic: str, partition: int) -> int:
        if (topic, partition) not in self.leaders:
            for described in self.admin.describe_topics([topic]):
                for p in described["partitions"]:
                    self.leaders[(topic, p["partition_index"])] = p["leader_id"]
        return self.leaders[(topic, partition)]

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int = FETCH_BYTES
    ) -> tuple[bytes, int]:
        """The raw batches from `offset` on (about `max_bytes`, at least the first whole
        batch), and the partition's high watermark."""
        fetching = FetchRequest.FetchTopic.FetchPartition
        request = FetchRequest(
            max_wait_ms=10, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[fetching(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, partition_max_bytes=max_bytes,
            )])],
            max_version=FETCH_VERSION,
        )  # fmt: skip
        node = self.leader(topic, partition)

        async def send() -> Any:
            # kafka-python's admin client has no Fetch call; its connection manager sends any
            # request to a node, with the client's security settings.
            return await self.admin._manager.send(request, node_id=node)

        answer = self.admin._manager.run(send).responses[0].partitions[0]
        if answer.error_code != 0:
            self.leaders.clear()  # a moved leader is found again on the next range
            raise FetchError(
                f"{topic}[{partition}] at {offset}: Fetch error {answer.error_code}",
                answer.error_code,
            )
        return answer.records or b"", answer.high_watermark

    def aborted(self, r: OffsetRange) -> list[tuple[int, int]]:
        """The aborted spans of the range `r` (topic as its cluster names it)."""
        walk = PartitionWalk(r.start, r.end)
        position = r.start
        while not walk.decided(position):
            records, high_watermark = self.fetch(r.topic, r.partition, position)
            if position >= high_watermark:
                raise UntoldAborts(f"{r.topic}[{r.partition}]: undecided at the high watermark")
            before = position
            for batch in batch_headers(records):
                walk.add(batch)
                position = batch.last_offset + 1
                if walk.decided(position):
                    break
            if position == before:
                raise UntoldAborts(f"{r.topic}[{r.partition}] at {position}: no whole batch")
        return walk.aborted


def told_aborts(
    sources: KafkaSources, ranges: Sequence[OffsetRange]
) -> tuple[dict[str, Spans], set[str]]:
    """The aborted spans of `ranges` per topic (as dgm names it) and partition, for the topics
    whose every range the walk could tell; and the topics it could not (logged, scrubbed)."""
    by_cluster: dict[str, list[tuple[str, OffsetRange]]] = {}
    for r in ranges:
        cluster, plain = split(r.topic, sources.options)
        by_cluster.setdefault(cluster, []).append((r.topic, replace(r, topic=plain)))
    told: dict[str, Spans] = {}
    untold: set[str] = set()
    for cluster, mine in by_cluster.items():
        settings = sources.clients[cluster]
        walker: MarkerWalker | None = None
        try:
            walker = MarkerWalker(settings)
            for topic, r in mine:
                if topic in untold:
                    continue
                try:
                    spans = walker.aborted(r) if r.size > 0 else []
                except UntoldAborts as why:
                    log.info("audit: %s is read read_committed too: %s", topic, why)
                    untold.add(topic)
                    continue
                told.setdefault(topic, {}).setdefault(r.partition, []).extend(spans)
        except Exception as error:  # kafka-python raises many kinds; the second read still works
            message = scrub(f"{type(error).__name__}: {error}", settings)
            log.warning(
                "audit: the transaction markers on cluster %s were not read: %s", cluster, message
            )
            untold.update(topic for topic, _ in mine)
        finally:
            if walker is not None:
                walker.close()
    return {t: spans for t, spans in told.items() if t not in untold}, untold
