from __future__ import annotations

import pytest

from collectors.partitions import (
    ClusterView,
    NoTopicsMatch,
    PartitionInfo,
    check_matches,
    describe_cluster,
    is_monitored,
)
from dgm.config.collectors import CollectorSettings


def test_default_patterns_take_every_topic_but_internal_ones() -> None:
    settings = CollectorSettings()
    assert is_monitored("orders", settings.include_topics, settings.exclude_topics)
    assert not is_monitored("__consumer_offsets", settings.include_topics, settings.exclude_topics)


def test_include_and_exclude_are_searches() -> None:
    assert is_monitored("eu.orders.v2", ["orders"], [])
    assert not is_monitored("eu.orders.v2", ["orders"], [r"\.v2$"])
    assert not is_monitored("payments", ["orders", "refunds"], [])


def view(topics: tuple[str, ...], partitions: tuple[PartitionInfo, ...] = ()) -> ClusterView:
    return ClusterView("c", frozenset({1}), topics, partitions)


def test_patterns_matching_none_of_the_topics_are_an_error_naming_them() -> None:
    settings = CollectorSettings(include_topics=("^nope$",))
    with pytest.raises(NoTopicsMatch) as error:
        check_matches(view(("__consumer_offsets", "orders", "payments")), settings)
    message = str(error.value)
    assert "['^nope$']" in message and "2 topics (orders, payments)" in message


def test_a_cluster_without_topics_of_its_own_is_fine_they_may_come() -> None:
    check_matches(view(("__consumer_offsets",)), CollectorSettings())
    check_matches(view(("orders",), (PartitionInfo("orders", 0, 1),)), CollectorSettings())


def test_describe_cluster_lists_monitored_partitions(kafka) -> None:
    topic = kafka.new_topic("coll-parts", partitions=3)
    settings = CollectorSettings(include_topics=(f"^{topic}$",))
    found = describe_cluster(kafka.admin(), settings, 10)
    assert [(p.topic, p.partition) for p in found.partitions] == [(topic, i) for i in range(3)]
    assert all(p.leader in found.brokers for p in found.partitions)
    assert found.cluster_id and topic in found.topics
