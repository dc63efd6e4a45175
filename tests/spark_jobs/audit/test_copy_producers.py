"""The producer session and sequence of given offsets, read from the batch headers on a real
broker: idempotent, plain and transactional producers, broker-stamped timestamps, deleted
records, and a cluster that does not answer."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import IsolationLevel, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from spark_jobs.audit.aborted_batches import BatchHeader
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.copy_producers import SCHEMA, producers_of, sequence_of
from tests.support.kafka_cluster import KafkaUnderTest

pytestmark = pytest.mark.integration

Coordinate = tuple[str, int, int]


def sources(kafka: KafkaUnderTest, **others: str) -> KafkaSources:
    """The default cluster `kafka`, and `others` by name at their bootstrap servers."""
    servers = {DEFAULT_CLUSTER: kafka.bootstrap_servers, **others}
    return KafkaSources(
        options={name: {"kafka.bootstrap.servers": s} for name, s in servers.items()},
        clients={name: {"bootstrap.servers": s} for name, s in servers.items()},
    )


def coordinates(found: Iterable[Coordinate]) -> pa.Table:
    topics, partitions, offsets = zip(*found, strict=True)
    return pa.table(
        {
            "topic": pa.array(topics, pa.string()),
            "partition": pa.array(partitions, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
        }
    )


def write(producer: Producer, topic: str, count: int, partitions: int = 1) -> list[Coordinate]:
    """`count` records spread over `partitions`, flushed; their coordinates."""
    written: list[Coordinate] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        assert error is None, error
        written.append((topic, message.partition(), message.offset()))  # type: ignore[arg-type]

    for i in range(count):
        producer.produce(
            topic, value=f"v{i}".encode(), partition=i % partitions, on_delivery=delivered
        )
    assert producer.flush(30) == 0
    return sorted(written)


def by_coordinate(table: pa.Table) -> dict[Coordinate, dict[str, Any]]:
    assert table.schema == SCHEMA
    return {(r["topic"], r["partition"], r["offset"]): r for r in table.to_pylist()}


def test_an_idempotent_producer_numbers_each_partitions_records_from_zero(
    kafka: KafkaUnderTest,
) -> None:
    topic = kafka.new_topic("copies-idempotent", partitions=2)
    producer = Producer(kafka.client_config(**{"enable.idempotence": True, "linger.ms": 50}))
    written = write(producer, topic, 40, partitions=2)
    found = by_coordinate(producers_of(sources(kafka), coordinates(written)))
    assert sorted(found) == written
    assert len({r["producer_id"] for r in found.values()}) == 1
    assert all(r["producer_id"] >= 0 and r["producer_epoch"] == 0 for r in found.values())
    assert not any(r["log_append_time"] for r in found.values())
    for partition in (0, 1):
        mine = [found[c] for c in written if c[1] == partition]
        assert [r["producer_sequence"] for r in mine] == list(range(len(mine)))
        assert all(r["batch_base_offset"] <= r["offset"] for r in mine)
    # Lingering put several records in a batch: their sequences come from the batch's first.
    assert len({(r["partition"], r["batch_base_offset"]) for r in found.values()}) < len(found)


def test_a_producer_without_idempotence_has_no_producer_id_epoch_or_sequence(
    kafka: KafkaUnderTest,
) -> None:
    topic = kafka.new_topic("copies-plain")
    producer = Producer(kafka.client_config(**{"enable.idempotence": False, "acks": "1"}))
    written = write(producer, topic, 5)
    found = by_coordinate(producers_of(sources(kafka), coordinates(written)))
    assert sorted(found) == written
    for r in found.values():
        assert r["producer_id"] is r["producer_epoch"] is r["producer_sequence"] is None


def wait_for_stable_end(kafka: KafkaUnderTest, topic: str) -> int:
    """The high watermark, once the LSO reached it (every marker written)."""
    partition = TopicPartition(topic, 0)

    def end(isolation: IsolationLevel) -> int:
        found = kafka.admin().list_offsets(
            {partition: OffsetSpec.latest()}, isolation_level=isolation
        )
        return int(found[partition].result(timeout=10).offset)

    def stable() -> int | None:
        high = end(IsolationLevel.READ_UNCOMMITTED)
        return high if end(IsolationLevel.READ_COMMITTED) == high else None

    return wait_until(stable, 30, f"{topic}'s LSO to reach its high watermark")


def test_committed_and_aborted_records_are_told_and_markers_are_not_records(
    kafka: KafkaUnderTest,
) -> None:
    topic = kafka.new_topic("copies-transactional")
    producer = Producer(kafka.client_config(**{"transactional.id": f"tx-{uuid.uuid4().hex}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    committed = write(producer, topic, 3)
    producer.commit_transaction(30)
    producer.begin_transaction()
    aborted = write(producer, topic, 3)
    producer.abort_transaction(30)
    high = wait_for_stable_end(kafka, topic)
    every = [(topic, 0, o) for o in range(high)]
    markers = sorted(set(every) - set(committed) - set(aborted))
    assert len(markers) == 2  # a COMMIT then an ABORT
    found = by_coordinate(producers_of(sources(kafka), coordinates(every)))
    # A marker's offset holds no record: it is absent, as an offset the log never held.
    assert sorted(found) == sorted(committed + aborted)
    assert len({r["producer_id"] for r in found.values()}) == 1
    assert all(r["producer_id"] >= 0 and r["producer_epoch"] >= 0 for r in found.values())
    # One session numbers its records on: unique within an epoch (a client on transactions
    # v2, KIP-890, bumps the epoch at each transaction's end and starts again).
    numbered = {(r["producer_epoch"], r["producer_sequence"]) for r in found.values()}
    assert len(numbered) == 6 and all(s is not None for _, s in numbered)


def test_a_topic_stamped_by_the_broker_says_log_append_time(kafka: KafkaUnderTest) -> None:
    topic = kafka.new_topic("copies-append", config={"message.timestamp.type": "LogAppendTime"})
    written = write(Producer(kafka.client_config()), topic, 3)
    found = by_coordinate(producers_of(sources(kafka), coordinates(written)))
    assert sorted(found) == written and all(r["log_append_time"] for r in found.values())


def test_deleted_records_and_offsets_past_the_log_end_are_absent(kafka: KafkaUnderTest) -> None:
    topic = kafka.new_topic("copies-deleted")
    producer = Producer(kafka.client_config(**{"enable.idempotence": True}))
    written = [c for _ in range(4) for c in write(producer, topic, 5)]  # 4 batches of 5
    deleted = kafka.admin().delete_records([TopicPartition(topic, 0, 12)])
    for future in deleted.values():
        future.result(timeout=30)
    asked = [*written, (topic, 0, 20), (topic, 0, 1000)]
    found = by_coordinate(producers_of(sources(kafka), coordinates(asked)))
    assert sorted(found) == [c for c in written if c[2] >= 12]
    assert [found[(topic, 0, o)]["producer_sequence"] for o in range(12, 20)] == list(range(12, 20))


def test_a_cluster_that_does_not_answer_tells_nothing_and_raises_nothing(
    kafka: KafkaUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    topic = kafka.new_topic("copies-down")
    written = write(Producer(kafka.client_config()), topic, 2)
    (closed,) = free_ports(1)  # nothing listens there once the probe socket closed
    down = [("down/t", 0, 0), ("down/t", 0, 7)]
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        found = producers_of(
            sources(kafka, down=f"127.0.0.1:{closed}"), coordinates([*written, *down]), timeout_s=2
        )
    assert sorted(by_coordinate(found)) == written
    assert time.monotonic() - started < 20
    assert [r.getMessage() for r in caplog.records if "cluster down" in r.getMessage()]
    empty = producers_of(sources(kafka), coordinates([("t", 0, 0)]).slice(0, 0))
    assert empty.num_rows == 0 and empty.schema == SCHEMA


def test_a_sequence_wraps_past_the_largest_int32_as_kafka_counts() -> None:
    batch = BatchHeader(10, 14, 7, False, producer_epoch=0, base_sequence=2**31 - 2)
    assert [sequence_of(batch, o) for o in range(10, 14)] == [2**31 - 2, 2**31 - 1, 0, 1]
    assert sequence_of(BatchHeader(0, 0, -1, False), 0) is None
