"""MirrorMaker 2's lab configuration and jar lock, without a broker."""

from __future__ import annotations

import dataclasses
from typing import Any

from embedded_kafka.kafka_jars import BROKER, MIRROR, MIRROR_VERSION, JarSet
from lab.mirror.config import MirrorSettings, mm2_properties, render
from lab.mirror.run import task_started


def settings(**changes: Any) -> MirrorSettings:
    base = MirrorSettings("127.0.0.1:1", "127.0.0.1:2", "orders", "run-1", rest_port=8083)
    return dataclasses.replace(base, **changes)


def test_one_flow_a_to_b_of_one_topic_with_one_task() -> None:
    p = mm2_properties(settings())
    assert p["clusters"] == "a, b"
    assert (p["a.bootstrap.servers"], p["b.bootstrap.servers"]) == ("127.0.0.1:1", "127.0.0.1:2")
    assert (p["a->b.enabled"], p["a->b.topics"], p["b->a.enabled"]) == ("true", "orders", "false")
    assert p["tasks.max"] == "1"
    assert all(p[k] == "1" for k in p if k.endswith("replication.factor"))
    # The worker's group and internal topics are the run's own: runs never share a Connect cluster.
    assert p["b.group.id"] == "run-1-mm2"
    assert p["b.offset.storage.topic"] == "run-1-mm2-offsets"


def test_exactly_once_sets_the_documented_properties_only_when_asked() -> None:
    plain, eos = mm2_properties(settings()), mm2_properties(settings(exactly_once=True))
    added = {k: eos[k] for k in set(eos) - set(plain)}
    assert added == {
        "b.exactly.once.source.support": "enabled",
        "a.consumer.isolation.level": "read_committed",
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": "http://127.0.0.1:8083",
        "b.producer.transaction.timeout.ms": "10000",
    }


def test_replica_name_follows_the_policy() -> None:
    assert settings().replica_topic == "a.orders"
    assert settings(policy="identity").replica_topic == "orders"
    assert mm2_properties(settings(policy="identity"))["replication.policy.class"].endswith(
        "IdentityReplicationPolicy"
    )


def test_rendered_as_a_properties_file() -> None:
    assert render({"a->b.enabled": "true"}) == "a->b.enabled = true\n"


def test_ready_once_the_source_task_started() -> None:
    line = (
        "12:00:00.000 INFO  AbstractWorkerSourceTask: ExactlyOnceWorkerSourceTask"
        "{id=MirrorSourceConnector-0} Source task finished initialization and start"
    )
    assert task_started(line) is True
    assert task_started("12:00:00.000 WARN  NetworkClient: something") is None


def test_the_lock_adds_connect_mirror_to_the_broker_jars() -> None:
    mirror = JarSet.pinned(MIRROR, MIRROR_VERSION).jars()
    names = {(jar.group, jar.artifact): jar.version for jar in mirror}
    assert names == {
        ("org.apache.kafka", "connect-mirror"): MIRROR_VERSION,
        ("org.apache.kafka", "connect-mirror-client"): MIRROR_VERSION,
    }
    broker = {(jar.group, jar.artifact) for jar in JarSet.pinned(BROKER, MIRROR_VERSION).jars()}
    assert ("org.apache.kafka", "connect-runtime") in broker  # what MirrorMaker 2 runs on
    assert all(len(jar.sha256) == 64 and jar.size > 0 for jar in mirror)
