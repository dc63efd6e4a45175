"""Pure parts of the embedded broker: property rendering, Java version parsing, the jar lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedded_kafka import java
from embedded_kafka.distribution import SCALA_VERSION, SLF4J_VERSION
from embedded_kafka.kafka_jars import BROKER, KAFKA_VERSION, JarSet
from embedded_kafka.properties import NodePorts, server_properties


def ports(node_id: int) -> NodePorts:
    base = 10000 * node_id
    return NodePorts(node_id, base, base + 1, base + 2, base + 3)


def test_single_broker_replication_is_one() -> None:
    props = server_properties(ports(1), [ports(1)], Path("/data"))
    assert props["min.insync.replicas"] == "1"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:10001"


def test_three_brokers_replicate_three_times_with_min_isr_two() -> None:
    quorum = [ports(i) for i in (1, 2, 3)]
    props = server_properties(quorum[1], quorum, Path("/data"))
    assert props["node.id"] == "2"
    assert props["default.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["controller.quorum.voters"].split(",") == [
        "1@127.0.0.1:10001",
        "2@127.0.0.1:20001",
        "3@127.0.0.1:30001",
    ]


def test_fault_listener_binds_one_port_and_advertises_another() -> None:
    props = server_properties(ports(1), [ports(1)], Path("/data"))
    assert "FAULT://127.0.0.1:10002" in props["listeners"]
    assert "FAULT://127.0.0.1:10003" in props["advertised.listeners"]
    assert "FAULT://127.0.0.1:10002" not in props["advertised.listeners"]


def test_overrides_win() -> None:
    props = server_properties(
        ports(1), [ports(1)], Path("/d"), {"transaction.max.timeout.ms": "5000"}
    )
    assert props["transaction.max.timeout.ms"] == "5000"


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_402"', 8),
    ],
)
def test_java_major_version(output: str, major: int) -> None:
    assert java.parse_java_major(output) == major


def test_missing_java_says_how_to_use_an_existing_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(java.JavaNotFound) as error:
        java.find_java()
    assert "Java 17+" in str(error.value)
    assert "bootstrap_servers" in str(error.value)


def test_lock_pins_kafka_and_slf4j_two() -> None:
    jars = JarSet.pinned(BROKER).jars()
    pinned = {(jar.group, jar.artifact): jar.version for jar in jars}
    assert pinned[("org.apache.kafka", f"kafka_{SCALA_VERSION}")] == KAFKA_VERSION
    assert pinned[("org.apache.kafka", "kafka-tools")] == KAFKA_VERSION
    assert pinned[("org.slf4j", "slf4j-api")] == SLF4J_VERSION
    assert all(len(jar.sha256) == 64 and jar.size > 0 for jar in jars)
