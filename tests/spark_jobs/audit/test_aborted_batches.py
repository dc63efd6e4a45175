"""The aborted records told by the batches' markers: the walk against a model of interleaved
transactions, then against what a read_committed consumer skips on a real broker, then the
audit marking from them equal to the audit that reads the topic twice."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.config.cluster import ClusterConfig
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.contracts.samples import SampleStore
from dgm.util.waiting import wait_until
from spark_jobs.audit import aborted_batches, chunked_read, kafka_source
from spark_jobs.audit.aborted_batches import ABORT, BatchHeader, MarkerWalker, PartitionWalk
from spark_jobs.audit.audit import audit
from spark_jobs.audit.ranges import OffsetRange
from tests.support.audited_pipeline import config, pipeline, sample, seen
from tests.support.secured_kafka import DGM_USER, SecuredKafka, needed

COMMIT = 1

# One step of a partition's log: producer p writes a batch of n records (in its transaction
# when it is transactional), or ends its transaction with a marker.
step = st.one_of(
    st.tuples(st.just("batch"), st.integers(0, 3), st.integers(1, 4)),
    st.tuples(st.just("end"), st.integers(0, 3), st.sampled_from([ABORT, COMMIT])),
)


def build_log(steps: list[tuple[str, int, int]]) -> tuple[list[BatchHeader], set[int]]:
    """Batches in offset order, every transaction ended, and the aborted offsets. Producers
    0-2 are transactional, 3 is not."""
    batches: list[BatchHeader] = []
    open_batches: dict[int, list[BatchHeader]] = {}
    aborted: set[int] = set()
    offset = 0

    def end(producer: int, marker: int) -> None:
        nonlocal offset
        if producer not in open_batches:
            return  # no open transaction: a producer only writes a marker to end one
        for b in open_batches.pop(producer):
            if marker == ABORT:
                aborted.update(range(b.base_offset, b.last_offset + 1))
        batches.append(BatchHeader(offset, offset, producer, True, marker))
        offset += 1

    for kind, producer, n in steps:
        if kind == "batch":
            transactional = producer < 3
            batch = BatchHeader(offset, offset + n - 1, producer, transactional)
            batches.append(batch)
            offset += n
            if transactional:
                open_batches.setdefault(producer, []).append(batch)
        elif producer < 3:
            end(producer, n)
    for producer in sorted(open_batches):
        end(producer, COMMIT)
    return batches, aborted


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(step, max_size=40), data=st.data())
def test_the_walk_tells_the_aborted_offsets_of_any_range(
    steps: list[tuple[str, int, int]], data: Any
) -> None:
    batches, aborted = build_log(steps)
    size = batches[-1].last_offset + 1 if batches else 0
    start = data.draw(st.integers(0, size))
    end = data.draw(st.integers(start, size))
    walk = PartitionWalk(start, end)
    position = start
    # As MarkerWalker does: from the batch holding `start`, until every fate is known.
    for batch in (b for b in batches if b.last_offset >= start):
        if walk.decided(position):
            break
        walk.add(batch)
        position = batch.last_offset + 1
    assert walk.decided(position) or end == start or not batches
    told = {o for first, last in walk.aborted for o in range(first, last + 1)}
    assert told == {o for o in aborted if start <= o < end}


def test_a_transaction_open_past_the_range_end_is_undecided_until_its_marker() -> None:
    walk = PartitionWalk(0, 5)
    walk.add(BatchHeader(0, 5, producer_id=7, transactional=True))
    assert not walk.decided(6)
    walk.add(BatchHeader(6, 6, producer_id=8, transactional=True, marker=ABORT))  # another's
    assert not walk.decided(7)
    walk.add(BatchHeader(7, 7, producer_id=7, transactional=True, marker=ABORT))
    assert walk.decided(8) and walk.aborted == [(0, 4)]


def offsets(kafka: Any, topic: str, isolation: str) -> set[int]:
    consumer = Consumer(kafka.client_config(**{"group.id": "truth", "isolation.level": isolation}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    found: set[int] = set()
    high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    try:
        while True:
            message = consumer.poll(1.0)
            offset = None if message is None else message.offset()
            if message is None or offset is None:
                return found
            if message.error() is None:
                found.add(offset)
            if offset >= high - 1:
                return found
    finally:
        consumer.close()


def interleaved(client: dict[str, Any], topic: str) -> None:
    """Two transactional producers and a plain one on one partition, each send a batch:
    A opens, B opens, plain, A aborts, B writes more, B commits, A writes and commits,
    B writes and aborts. B's first transaction outlives A's abort marker. `client`: the
    librdkafka settings of a principal that may write."""

    def transactional() -> Producer:
        producer = Producer({**client, "transactional.id": f"tx-{uuid.uuid4().hex[:10]}"})
        producer.init_transactions(30)
        return producer

    a, b = transactional(), transactional()
    plain = Producer({**client, "acks": "all"})

    def send(producer: Producer, label: str, count: int = 3) -> None:
        for i in range(count):
            producer.produce(
                topic, value=f"{label}-{i}".encode(), headers=[("dgm-id", f"{label}-{i}")]
            )
        assert producer.flush(30) == 0

    a.begin_transaction()
    send(a, "a1")
    b.begin_transaction()
    send(b, "b1")
    send(plain, "p1", 2)
    a.abort_transaction(30)
    send(b, "b2")
    b.commit_transaction(30)
    a.begin_transaction()
    send(a, "a2")
    a.commit_transaction(30)
    b.begin_transaction()
    send(b, "b3")
    b.abort_transaction(30)
    send(plain, "p2", 2)
    # The coordinator writes the markers after the producer hears back: wait for the last.
    partition = TopicPartition(topic, 0)
    admin = AdminClient(client)

    def end(isolation: IsolationLevel) -> int:
        found = admin.list_offsets({partition: OffsetSpec.latest()}, isolation_level=isolation)
        return int(found[partition].result(timeout=10).offset)

    wait_until(
        lambda: end(IsolationLevel.READ_COMMITTED) == end(IsolationLevel.READ_UNCOMMITTED),
        30,
        f"{topic}'s LSO to reach its high watermark",
    )


def test_the_walk_tells_what_a_read_committed_consumer_skips(kafka: Any) -> None:
    topic = kafka.new_topic("markers")
    interleaved(kafka.client_config(), topic)
    every = offsets(kafka, topic, "read_uncommitted")
    skipped = every - offsets(kafka, topic, "read_committed")
    assert len(skipped) == 6  # a1 and b3
    walker = MarkerWalker(kafka.client_config())
    try:
        high = max(every) + 1
        for start in range(0, high, 3):
            for end in range(start + 1, high + 1, 4):
                spans = walker.aborted(OffsetRange(topic, 0, start, end))
                told = {o for first, last in spans for o in range(first, last + 1)}
                assert told == {o for o in skipped if start <= o < end}, (start, end)
    finally:
        walker.close()


@pytest.fixture
def isolations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The isolation level of every Kafka read the audit plans."""
    used: list[str] = []
    original = kafka_source.read_range

    def spied(spark: Any, options: Any, ranges: Any, isolation: str, *args: Any) -> Any:
        used.append(isolation)
        return original(spark, options, ranges, isolation, *args)

    monkeypatch.setattr(kafka_source, "read_range", spied)
    return used


def test_the_audit_marks_from_the_markers_in_one_read_as_the_second_read_does(
    spark: Any, kafka: Any, tmp_path: Path, isolations: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = kafka.new_topic("markers")
    interleaved(kafka.client_config(), topic)
    cfg = config(tmp_path / "told", pipeline(topic))
    sample(kafka, cfg.state_dir, topic)
    told = audit(spark, cfg, kafka.bootstrap_servers)
    assert told.transactional == (topic,) and isolations == ["read_uncommitted"]
    marked = seen(spark, cfg.state_dir)

    # The same ranges with the markers unread: the topic is read twice, as before.
    monkeypatch.setattr(chunked_read, "told_aborts", lambda sources, ranges: ({}, set()))
    isolations.clear()
    again = config(tmp_path / "twice", pipeline(topic))
    sample(kafka, again.state_dir, topic)
    twice = audit(spark, again, kafka.bootstrap_servers)
    assert twice.ranges == told.ranges and "read_committed" in isolations
    assert seen(spark, again.state_dir) == marked
    assert sorted(str(m) for _, m, committed in marked if not committed) == [
        *(f"a1-{i}" for i in range(3)),
        *(f"b3-{i}" for i in range(3)),
    ]


def test_markers_that_cannot_be_read_leave_the_topic_to_the_second_read(
    spark: Any, kafka: Any, tmp_path: Path, isolations: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = kafka.new_topic("markers")
    interleaved(kafka.client_config(), topic)

    def refused(self: Any, r: OffsetRange) -> Any:
        raise aborted_batches.UntoldAborts("refused in this test")

    monkeypatch.setattr(MarkerWalker, "aborted", refused)
    cfg = config(tmp_path, pipeline(topic))
    sample(kafka, tmp_path, topic)
    result = audit(spark, cfg, kafka.bootstrap_servers)
    assert result.transactional == (topic,) and "read_committed" in isolations
    assert sum(not committed for _, _, committed in seen(spark, tmp_path)) == 6


def test_the_markers_are_read_with_the_clusters_security_settings_and_read_rights_only(
    kafka_sasl: SecuredKafka, spark: Any, tmp_path: Path, isolations: list[str]
) -> None:
    topic = kafka_sasl.new_topic("markers")
    superuser = kafka_sasl.admin_config()
    interleaved(superuser, topic)
    admin = Clients(superuser, 10)
    settings = CollectorSettings(include_topics=(f"^{re.escape(topic)}$",))
    try:
        assert Collector(admin, settings, SampleStore(tmp_path), 10).cycle()
    finally:
        admin.close()
    granted = needed(DGM_USER, [topic], ["g"])
    kafka_sasl.grant(granted)
    cfg = DgmConfig(
        state_dir=tmp_path,
        cluster=ClusterConfig(client=kafka_sasl.scram_client()),
        pipelines=(pipeline(topic),),
    )
    try:
        result = audit(spark, cfg, kafka_sasl.bootstrap_servers)
    finally:
        kafka_sasl.revoke(granted)
    assert result.transactional == (topic,) and isolations == ["read_uncommitted"]
    assert sum(not committed for _, _, committed in seen(spark, tmp_path)) == 6
