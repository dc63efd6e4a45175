"""The fault proxy in front of the embedded broker's FAULT listener: a dropped Produce response
makes the client really retry, which duplicates without idempotence and does not with it."""

from __future__ import annotations

import struct
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from dgm.contracts import headers
from dgm.contracts.headers import header_map
from dgm.util.waiting import wait_until
from lab.ledger import read_ledger
from lab.producer import ProducerResult, ProducerSettings, run_producer
from lab.proxy import FaultProxy, NotKafka, proxies_for, request_header, response_correlation
from tests.support.proxied import FAST_RETRIES

MESSAGES = 20_000  # an upper bound: the run stops after DROPS dropped responses
DROPS = 8


def test_frames_are_read_by_correlation_id() -> None:
    request = struct.pack(">hhi", 0, 9, 4242) + b"\x00\x05lab-1rest"
    assert request_header(request) == (0, 4242)
    assert response_correlation(struct.pack(">i", 4242) + b"body") == 4242
    with pytest.raises(NotKafka):
        request_header(b"\x00\x00")
    with pytest.raises(NotKafka):
        response_correlation(b"")


def test_fault_settings_are_checked() -> None:
    proxy = FaultProxy(1, 2)
    with pytest.raises(ValueError, match="probability"):
        proxy.drop_produce_responses(1.5)
    with pytest.raises(ValueError, match="delay"):
        proxy.delay_responses(-1)


@pytest.fixture
def proxies(kafka: Any) -> Iterator[list[FaultProxy]]:
    started = proxies_for(kafka.require_embedded())
    try:
        yield started
    finally:
        for proxy in started:
            proxy.stop()


def read_all(kafka: Any, topic: str) -> list[Any]:
    """Every record of `topic` up to its high watermark, read directly (not through a proxy)."""
    consumer = Consumer(
        kafka.client_config(
            **{"group.id": f"reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
        )
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[Any] = []

        def caught_up() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append(message)
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            return all(tp.offset >= ends[tp.partition] for tp in positions)

        wait_until(caught_up, 60, f"a reader to reach the end of {topic}", interval=0)
        return records
    finally:
        consumer.close()


def copies_by_id(records: list[Any]) -> dict[str, list[tuple[int, int, str, int]]]:
    """dgm-id -> its copies as (partition, offset, dgm-producer, dgm-seq)."""
    copies: dict[str, list[tuple[int, int, str, int]]] = defaultdict(list)
    for r in records:
        h = header_map(r.headers())
        copies[h[headers.ID].decode()].append(
            (r.partition(), r.offset(), h[headers.PRODUCER].decode(), int(h[headers.SEQ]))
        )
    return copies


def produce_through(
    kafka: Any, proxies: list[FaultProxy], tmp_path: Path, idempotence: bool
) -> tuple[str, ProducerResult]:
    """Produce through the proxies, dropping 1 in 5 Produce responses, until DROPS have been
    dropped: a count of faults, not of messages, is what makes the test meaningful."""
    topic = kafka.new_topic("proxied", partitions=2)
    for proxy in proxies:
        proxy.drop_produce_responses(0.2)
    settings = ProducerSettings(
        bootstrap_servers=kafka.require_embedded().fault_bootstrap_servers,
        topic=topic,
        messages=MESSAGES,
        ledger_path=tmp_path / "ledger.jsonl",
        rate=500.0,  # many small Produce requests, so many responses to drop
        acks="all",
        retries=20,
        enable_idempotence=idempotence,
        client=FAST_RETRIES,
    )
    stop = threading.Event()
    results: list[ProducerResult] = []
    producing = threading.Thread(target=lambda: results.append(run_producer(settings, stop)))
    producing.start()
    try:
        wait_until(lambda: sum(p.dropped for p in proxies) >= DROPS, 60, f"{DROPS} dropped acks")
    finally:
        stop.set()
        producing.join(90)
    assert not producing.is_alive() and results, "the producer did not finish"
    return topic, results[0]


def test_lost_acks_without_idempotence_make_real_duplicates(
    kafka: Any, proxies: list[FaultProxy], tmp_path: Path
) -> None:
    topic, result = produce_through(kafka, proxies, tmp_path, idempotence=False)
    dropped = sum(p.dropped for p in proxies)
    assert dropped > 0
    copies = copies_by_id(read_all(kafka, topic))
    duplicated = {m: c for m, c in copies.items() if len(c) > 1}
    extra = sum(len(c) - 1 for c in duplicated.values())
    print(
        f"{result.sent} sent, {dropped} responses dropped, {len(duplicated)} ids duplicated, "
        f"{extra} extra copies"
    )
    assert duplicated, f"{dropped} dropped acks but no duplicate"
    # A producer retry: every copy carries the same session and sequence, at distinct offsets.
    for c in duplicated.values():
        assert len({(producer, seq) for _, _, producer, seq in c}) == 1
        assert len({(partition, offset) for partition, offset, _, _ in c}) == len(c)
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert set(copies) <= ledger.sent_ids
    for message_id, (partition, offset) in ledger.acked.items():
        assert (partition, offset) in {(p, o) for p, o, _, _ in copies[message_id]}
    assert 0 < result.sent < MESSAGES


def test_lost_acks_with_idempotence_make_no_duplicates(
    kafka: Any, proxies: list[FaultProxy], tmp_path: Path
) -> None:
    topic, result = produce_through(kafka, proxies, tmp_path, idempotence=True)
    dropped = sum(p.dropped for p in proxies)
    assert dropped > 0
    copies = copies_by_id(read_all(kafka, topic))
    print(
        f"{result.sent} sent, {dropped} responses dropped, "
        f"{sum(len(c) - 1 for c in copies.values())} extra copies"
    )
    assert all(len(c) == 1 for c in copies.values())
    assert (result.acked, result.failed) == (result.sent, 0)
    assert len(copies) == result.sent  # nothing lost either
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert ledger.acked == {m: (c[0][0], c[0][1]) for m, c in copies.items()}


def test_delayed_responses_really_wait(kafka: Any, proxies: list[FaultProxy]) -> None:
    topic = kafka.new_topic("delayed")
    producer = Producer({"bootstrap.servers": kafka.require_embedded().fault_bootstrap_servers})
    producer.produce(topic, value=b"warm-up")
    assert producer.flush(30) == 0  # connections and metadata in place before timing
    for proxy in proxies:
        proxy.delay_responses(0.5)
    started = time.monotonic()
    producer.produce(topic, value=b"delayed")
    assert producer.flush(30) == 0
    assert time.monotonic() - started >= 0.5
    assert sum(p.dropped for p in proxies) == 0
    assert len(read_all(kafka, topic)) == 2
