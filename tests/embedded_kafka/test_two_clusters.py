"""Two embedded clusters side by side: separate state folders, ports, cluster ids and data."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient

from embedded_kafka.cluster import EmbeddedCluster
from tests.support.kafka_cluster import KafkaUnderTest


def cluster_id(kafka: KafkaUnderTest) -> str:
    return str(kafka.admin().describe_cluster(request_timeout=10).result(timeout=30).cluster_id)


def topics(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def test_two_clusters_are_independent(kafka: KafkaUnderTest, second_kafka: KafkaUnderTest) -> None:
    first, second = kafka.require_embedded(), second_kafka.require_embedded()
    assert first.folder != second.folder
    assert set(first.bootstrap_servers.split(",")).isdisjoint(second.bootstrap_servers.split(","))
    assert cluster_id(kafka) == first.cluster_id
    assert cluster_id(second_kafka) == second.cluster_id != first.cluster_id
    only_first = kafka.new_topic("only-first")
    assert only_first in topics(kafka.admin())
    assert only_first not in topics(second_kafka.admin())
    # Each finds its own processes only: stopping one never reaches into the other.
    assert first.running_nodes() and second.running_nodes()
    assert not second.process_marker.startswith(first.process_marker)
    assert not first.process_marker.startswith(second.process_marker)


def test_a_cluster_marker_is_not_a_prefix_of_a_sibling_cluster(tmp_path: Path) -> None:
    one = EmbeddedCluster(tmp_path)
    sibling = EmbeddedCluster(tmp_path / "broker-b")  # its folder: <tmp>/broker-b/broker
    sibling_broker = str(sibling.folder / "node-1" / "server.properties")
    assert str(one.folder) in sibling_broker  # what a bare folder marker would match
    assert one.process_marker not in sibling_broker
    assert sibling.process_marker in sibling_broker
