"""Which producer session wrote each copy of a duplicate, and its sequence there, told by the
log's record batch headers: the duplicates of a topic whose producers stamp no dgm header are
explained by them alone (docs/design.md, "cause").

A magic v2 batch carries its producer id, epoch and first sequence; a record's sequence is the
first plus its offset's delta in the batch (wrapping at 2^31 - 1, as Kafka counts). Two copies
of one (producer, epoch, sequence) are a retry the broker did not deduplicate; copies from two
sessions or with two sequences were sent twice. confluent-kafka (librdkafka) decodes batches
into messages and drops these headers, so the batches are fetched raw with kafka-python, by
the transaction-marker walk's machinery (aborted_batches.py), and only their headers are read,
never their records. Copies are few and sit far apart in a log: only their batches are fetched,
a small fetch at each copy not yet resolved, never the log between them.

A coordinate the log no longer (or never) holds is absent from the answer: deleted by retention
or DeleteRecords, past the high watermark, a control batch's marker (not a record), on a
partition the broker refused or on a cluster that did not answer (one warning per cluster).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from kafka import TopicPartition
from kafka.admin import OffsetSpec
from kafka.errors import BrokerResponseError

from dgm.clients.kafka_python import scrub
from dgm.contracts.clusters import split
from spark_jobs.audit.aborted_batches import (
    REQUEST_TIMEOUT_S,
    BatchHeader,
    FetchError,
    MarkerWalker,
    UntoldAborts,
    batch_headers,
)
from spark_jobs.audit.cluster_sources import KafkaSources

log = logging.getLogger(__name__)

SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("producer_sequence", pa.int64()),
        ("log_append_time", pa.bool_()),
        ("batch_base_offset", pa.int64()),
    ]
)
# The copies of one incident sit close together (a replayed stretch, a retried batch): a fetch
# reaching a little past the copy asked for resolves its neighbours, and a lone copy costs a
# small fetch rather than the walk's 16 MiB. The broker returns a larger first batch whole.
COPY_FETCH_BYTES = 256 << 10
OFFSET_OUT_OF_RANGE = 1
MAX_SEQUENCE = 2**31 - 1
Row = tuple[str, int, int, int | None, int | None, int | None, bool, int]


def sequence_of(batch: BatchHeader, offset: int) -> int | None:
    """The producer sequence of the record at `offset` of `batch`; None when it has none."""
    if batch.base_sequence < 0:
        return None
    delta = offset - batch.base_offset
    if batch.base_sequence > MAX_SEQUENCE - delta:  # Kafka's DefaultRecordBatch.incrementSequence
        return delta - (MAX_SEQUENCE - batch.base_sequence) - 1
    return batch.base_sequence + delta


def row(topic: str, partition: int, offset: int, batch: BatchHeader) -> Row:
    producer = batch.producer_id if batch.producer_id >= 0 else None
    epoch = batch.producer_epoch if producer is not None and batch.producer_epoch >= 0 else None
    return (
        topic, partition, offset, producer, epoch, sequence_of(batch, offset),
        batch.log_append_time, batch.base_offset,
    )  # fmt: skip


def log_start(walker: MarkerWalker, topic: str, partition: int) -> int:
    tp = TopicPartition(topic, partition)
    return int(walker.admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset)


def partition_rows(
    walker: MarkerWalker, topic: str, partition: int, offsets: Sequence[int]
) -> Iterator[tuple[int, BatchHeader]]:
    """(offset, its batch) of the sorted, distinct `offsets` found on one partition (`topic` as
    its cluster names it). Each fetch starts at the lowest offset not yet resolved and resolves
    every offset its batches hold; each turn moves past that offset, retries a refused fetch
    once, or stops."""
    i, retried = 0, False
    while i < len(offsets):
        asked = offsets[i]
        try:
            records, high_watermark = walker.fetch(topic, partition, asked, COPY_FETCH_BYTES)
        except FetchError as error:
            if error.error_code != OFFSET_OUT_OF_RANGE:
                if retried:  # a moved leader is looked up again once (fetch forgot it)
                    raise
                retried = True
                continue
            # Below the log start or past the log end, and the error answer carries neither
            # (-1): asking for the log start skips every deleted offset at once.
            start = log_start(walker, topic, partition)
            if asked >= start:
                return
            i = bisect.bisect_left(offsets, start, i)
            continue
        retried = False
        if asked >= high_watermark:
            return
        for batch in batch_headers(records):
            while i < len(offsets) and offsets[i] <= batch.last_offset:
                # Below the batch: a gap in the log (compacted away); in a control batch: a
                # marker, not a record.
                if offsets[i] >= batch.base_offset and batch.marker is None:
                    yield offsets[i], batch
                i += 1
            if i == len(offsets) or offsets[i] >= high_watermark:
                return
        if i < len(offsets) and offsets[i] == asked:
            return  # no whole batch came back: stop rather than ask again forever


def cluster_rows(
    settings: Mapping[str, Any],
    wanted: Mapping[tuple[str, str, int], list[int]],
    timeout_s: float,
) -> tuple[list[Row], str | None]:
    """The rows found on one cluster (`wanted`: per dgm's topic name, the cluster's name and
    partition, the offsets) and what went wrong there, if anything (unscrubbed)."""
    rows: list[Row] = []
    problems: list[str] = []
    walker: MarkerWalker | None = None
    try:
        walker = MarkerWalker(settings, timeout_s)
        for (named, plain, partition), offsets in wanted.items():
            try:
                for offset, batch in partition_rows(walker, plain, partition, sorted(set(offsets))):
                    rows.append(row(named, partition, offset, batch))
            except (UntoldAborts, BrokerResponseError, KeyError) as error:
                # This partition's answer (a refusal, an unknown topic): the others may answer.
                problems.append(f"{named}[{partition}]: {type(error).__name__}: {error}")
    except Exception as error:  # kafka-python raises many kinds: the cluster's rows stop here
        problems.append(f"{type(error).__name__}: {error}")
    finally:
        if walker is not None:
            walker.close()
    if not problems:
        return rows, None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return rows, problems[-1] + more


def producers_of(
    sources: KafkaSources, coordinates: pa.Table, *, timeout_s: float = REQUEST_TIMEOUT_S
) -> pa.Table:
    """SCHEMA: one row per coordinate (topic as dgm names it, partition, offset) found in its
    log, with the producer id, epoch and sequence of its batch (null when it has none: a
    producer without idempotence), whether the broker set its timestamp and the batch's first
    offset. Never raises for want of Kafka: what it could not read is absent."""
    by_cluster: dict[str, dict[tuple[str, str, int], list[int]]] = {}
    for topic, partition, offset in zip(
        coordinates.column("topic").to_pylist(),
        coordinates.column("partition").to_pylist(),
        coordinates.column("offset").to_pylist(),
        strict=True,
    ):
        if topic is None or partition is None or offset is None:
            continue
        cluster, plain = split(topic, sources.options)
        key = (topic, plain, partition)
        by_cluster.setdefault(cluster, {}).setdefault(key, []).append(offset)
    rows: list[Row] = []
    for cluster, wanted in by_cluster.items():
        settings = sources.clients.get(cluster)
        if settings is None:
            log.warning("audit: copies' producers: no cluster %s is configured", cluster)
            continue
        found, problem = cluster_rows(settings, wanted, timeout_s)
        rows.extend(found)
        if problem is not None:
            log.warning(
                "audit: some copies' producers on cluster %s were not read: %s",
                cluster,
                scrub(problem, settings),
            )
    columns = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(SCHEMA)]
    return pa.table(columns, schema=SCHEMA)
