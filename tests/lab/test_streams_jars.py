"""The Streams application's jar lock: readable, and pinned like the broker's where they share."""

from __future__ import annotations

from embedded_kafka.kafka_jars import BROKER, KAFKA_VERSION, STREAMS, JarSet
from tests.support.truth import Record
from tests.support.truth_records import dropped_by_rule


def test_the_lock_pins_kafka_streams_and_no_rocksdb() -> None:
    streams = JarSet.pinned(STREAMS).jars()
    names = {(jar.group, jar.artifact): jar.version for jar in streams}
    assert names[("org.apache.kafka", "kafka-streams")] == KAFKA_VERSION
    assert names[("org.apache.kafka", "kafka-clients")] == KAFKA_VERSION
    assert ("org.rocksdb", "rocksdbjni") not in names  # a stateless topology never loads it
    assert all(len(jar.sha256) == 64 and jar.size > 0 for jar in streams)


def test_jars_shared_with_the_broker_have_the_same_pin() -> None:
    broker = {(jar.group, jar.artifact): jar for jar in JarSet.pinned(BROKER).jars()}
    streams = JarSet.pinned(STREAMS).jars()
    shared = [jar for jar in streams if (jar.group, jar.artifact) in broker]
    assert len(shared) == len(streams) - 1  # all but kafka-streams itself
    assert all(broker[(jar.group, jar.artifact)] == jar for jar in shared)


def record(value: bytes) -> Record:
    return Record(0, 0, None, value, {})


def test_the_truth_recomputes_the_filter_rule() -> None:
    assert dropped_by_rule(record(b'{"id": "a", "n": 20}'))
    assert not dropped_by_rule(record(b'{"id": "a", "n": 21}'))
    # What the application passes through, the truth expects: not JSON, no integer n.
    assert not dropped_by_rule(record(b"not json"))
    assert not dropped_by_rule(record(b'{"id": "a", "n": "10"}'))
    assert not dropped_by_rule(record(b'{"id": "a", "n": true}'))
    assert not dropped_by_rule(record(b'{"id": "a", "n": 20.0}'))
    assert dropped_by_rule(record(b'{"id": "a", "n": -100000000000000000000000}'))
