"""Per Kafka version and mode, without a broker: which releases dgm runs, what each one's lock
pins, and the properties, storage format arguments, logging and zoo.cfg each one gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedded_kafka import versions
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.kafka_jars import BROKER, KAFKA_VERSION, JarSet
from embedded_kafka.properties import (
    NodePorts,
    logging_config,
    server_properties,
    storage_format_arguments,
)
from embedded_kafka.versions import KRAFT, ZOOKEEPER, KafkaRelease, VersionError
from embedded_kafka.zookeeper import zoo_cfg

KRAFT_3 = KafkaRelease("3.6.2", KRAFT)
ZK_3 = KafkaRelease("3.9.2", ZOOKEEPER)
KRAFT_4 = KafkaRelease("4.4.0", KRAFT)


def ports(node_id: int) -> NodePorts:
    base = 10000 * node_id
    return NodePorts(node_id, base, base + 1, base + 2, base + 3)


def properties(release: KafkaRelease, node: int = 1, brokers: int = 1) -> dict[str, str]:
    quorum = [ports(i) for i in range(1, brokers + 1)]
    connect = "127.0.0.1:2181" if release.zookeeper else ""
    return server_properties(
        quorum[node - 1], quorum, Path("/d"), release=release, zookeeper_connect=connect
    )


# -- which releases ------------------------------------------------------------------------------


def test_the_default_is_the_one_constant_in_kraft_mode() -> None:
    assert versions.release() == KafkaRelease(KAFKA_VERSION, KRAFT)
    assert KAFKA_VERSION in versions.SUPPORTED


def test_a_line_names_its_pinned_patch() -> None:
    assert versions.release("3.9", ZOOKEEPER) == ZK_3
    assert versions.supported_version("4.0") == "4.0.2"


def test_an_unsupported_version_is_refused_with_the_supported_ones() -> None:
    with pytest.raises(VersionError) as error:
        versions.release("3.8.1")
    assert "3.6.2, 3.9.2, 4.0.2" in str(error.value)


def test_zookeeper_mode_is_refused_by_name_for_4x() -> None:
    with pytest.raises(VersionError) as error:
        versions.release("4.0.2", ZOOKEEPER)
    assert "no ZooKeeper mode" in str(error.value)
    assert "3.9.2" in str(error.value)  # what to use instead
    with pytest.raises(VersionError):
        KafkaRelease("3.9.2", "zk")


def test_the_tests_read_the_release_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(versions.VERSION_VARIABLE, raising=False)
    monkeypatch.delenv(versions.MODE_VARIABLE, raising=False)
    assert versions.from_environment() == KafkaRelease()
    monkeypatch.setenv(versions.VERSION_VARIABLE, "3.6")
    monkeypatch.setenv(versions.MODE_VARIABLE, ZOOKEEPER)
    assert versions.from_environment() == KafkaRelease("3.6.2", ZOOKEEPER)


def test_the_matrix_has_both_modes_for_3x_and_kraft_for_4x() -> None:
    cells = {(r.version, r.mode) for r in versions.matrix()}
    assert {("3.6.2", ZOOKEEPER), ("3.9.2", ZOOKEEPER), ("3.9.2", KRAFT)} <= cells
    assert {mode for version, mode in cells if version.startswith("4.")} == {KRAFT}
    assert len(cells) == len(versions.SUPPORTED) + len(versions.zookeeper_versions())


@pytest.mark.parametrize("version", list(versions.SUPPORTED))
def test_each_supported_version_pins_its_broker_and_logging(version: str) -> None:
    pinned = {
        (jar.group, jar.artifact): jar.version for jar in JarSet.pinned(BROKER, version).jars()
    }
    assert pinned[("org.apache.kafka", "kafka_2.13")] == version
    assert pinned[("org.apache.kafka", "kafka-tools")] == version
    if KafkaRelease(version).log4j2:
        assert pinned[("org.slf4j", "slf4j-api")].startswith("2.")
        assert ("org.apache.logging.log4j", "log4j-slf4j2-impl") in pinned
    else:  # what Kafka 3.x ships, and the ZooKeeper its ZooKeeper mode runs
        assert pinned[("org.slf4j", "slf4j-reload4j")] == pinned[("org.slf4j", "slf4j-api")]
        assert ("ch.qos.reload4j", "reload4j") in pinned
        assert pinned[("org.apache.zookeeper", "zookeeper")].startswith("3.8.")


# -- properties per release -----------------------------------------------------------------------


@pytest.mark.parametrize("release", [KRAFT_3, KRAFT_4], ids=["3.x", "4.x"])
def test_kraft_combined_mode_on_3x_and_4x(release: KafkaRelease) -> None:
    props = properties(release, node=2, brokers=3)
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"].startswith("1@127.0.0.1:10001,")
    assert "CONTROLLER://127.0.0.1:20001" in props["listeners"]
    assert "zookeeper.connect" not in props and "broker.id" not in props


def test_a_zookeeper_mode_broker_registers_in_zookeeper_without_a_controller_listener() -> None:
    props = properties(ZK_3, node=3, brokers=3)
    assert props["broker.id"] == "3"
    assert props["zookeeper.connect"] == "127.0.0.1:2181"
    assert props["min.insync.replicas"] == "2"
    for kraft_only in ("process.roles", "node.id", "controller.quorum.voters"):
        assert kraft_only not in props
    assert not any(key.startswith("controller.") for key in props)
    assert "CONTROLLER" not in props["listeners"] + props["listener.security.protocol.map"]
    with pytest.raises(ValueError):
        server_properties(ports(1), [ports(1)], Path("/d"), release=ZK_3)


@pytest.mark.parametrize("release", [KRAFT_3, ZK_3, KRAFT_4], ids=["3-kraft", "3-zk", "4"])
def test_every_listener_is_on_loopback(release: KafkaRelease) -> None:
    props = properties(release)
    for key in ("listeners", "advertised.listeners"):
        hosts = {address.split("://")[1].rsplit(":", 1)[0] for address in props[key].split(",")}
        assert hosts == {"127.0.0.1"}


def test_share_coordinator_settings_only_where_the_broker_knows_them() -> None:
    assert "share.coordinator.state.topic.num.partitions" in properties(KRAFT_4)
    assert not any(key.startswith("share.") for key in properties(KRAFT_3))
    assert not any(key.startswith("share.") for key in properties(ZK_3))


def test_storage_format_is_the_same_on_3x_and_4x_kraft_and_skipped_for_zookeeper() -> None:
    arguments = storage_format_arguments(KRAFT_3, "abc", Path("/n/server.properties"))
    assert arguments == [
        "format",
        "--ignore-formatted",
        "--cluster-id=abc",
        "-c",
        "/n/server.properties",
    ]
    assert storage_format_arguments(KRAFT_4, "abc", Path("/n/server.properties")) == arguments
    assert "--standalone" not in arguments  # 3.x has no such flag; static voters need none
    assert storage_format_arguments(ZK_3, "abc", Path("/n/server.properties")) == []


def test_kafka_4_logs_through_log4j2_and_kafka_3_through_reload4j() -> None:
    four = logging_config(KRAFT_4, Path("/n"), Path("/n/logs/server.log"))
    assert four.path == Path("/n/log4j2.properties")
    assert four.jvm_option == "-Dlog4j2.configurationFile=/n/log4j2.properties"
    assert "appender.file.fileName = /n/logs/server.log" in four.text
    three = logging_config(ZK_3, Path("/n"), Path("/n/logs/server.log"))
    assert three.path == Path("/n/log4j.properties")
    assert three.jvm_option == "-Dlog4j.configuration=file:///n/log4j.properties"
    assert "log4j.appender.file.File=/n/logs/server.log" in three.text


def test_zookeeper_serves_on_loopback_without_its_admin_server() -> None:
    config = zoo_cfg(Path("/z/data"), 2181)
    assert "clientPort=2181\n" in config
    assert "clientPortAddress=127.0.0.1\n" in config
    assert "admin.enableServer=false\n" in config
    assert "dataDir=/z/data\n" in config


def test_the_description_keeps_version_mode_and_zookeeper(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path, brokers=3, release=ZK_3)
    cluster._assign_ports()
    cluster.save()
    loaded = EmbeddedCluster.load(tmp_path)
    assert loaded is not None and loaded.release == ZK_3
    assert cluster.zookeeper is not None and loaded.zookeeper is not None
    assert loaded.zookeeper.port == cluster.zookeeper.port
    assert loaded.zookeeper_marker == str(tmp_path / "broker" / "zookeeper" / "zoo.cfg")
    ports_used = [p for n in loaded.nodes for p in (n.ports.port, n.ports.controller_port)]
    assert loaded.zookeeper.port not in ports_used
