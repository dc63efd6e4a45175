"""The audit reading each topic from its own cluster: one topic name on two real clusters,
each read with its cluster's options and kept apart by its qualified name ('east/<topic>');
the transactional one read read_committed on its own cluster too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from collectors.clients import Clients
from collectors.cluster_store import ClusterSampleStore
from collectors.cycle import Collector
from dgm.config.cluster import ClusterConfig
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.samples import SampleStore
from spark_jobs.audit.audit import audit
from spark_jobs.audit.store import FingerprintStore
from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.stamped_writes import (
    plain,
    produce_committed_aborted_and_unidentified,
    wait_for_stable_end,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def sample(kafka: KafkaUnderTest, store: SampleStore, topic: str) -> None:
    clients = Clients(kafka.client_config(), request_timeout_s=10)
    settings = CollectorSettings(interval_s=1, include_topics=(f"^{re.escape(topic)}$",))
    try:
        assert Collector(clients, settings, store, request_timeout_s=10).cycle() is not None
    finally:
        clients.close()


def test_one_topic_name_on_two_clusters_is_audited_twice_apart(
    kafka: KafkaUnderTest, second_kafka: KafkaUnderTest, spark: Any, tmp_path: Path
) -> None:
    topic = kafka.new_topic("both")
    second_kafka.admin().create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    plain(kafka, topic, "a-0", "a-1")
    produce_committed_aborted_and_unidentified(second_kafka, topic)
    wait_for_stable_end(second_kafka, topic)
    sample(kafka, SampleStore(tmp_path), topic)
    sample(second_kafka, ClusterSampleStore(tmp_path, "east"), topic)
    config = DgmConfig(
        state_dir=tmp_path,
        clusters={"east": ClusterConfig(bootstrap_servers=second_kafka.bootstrap_servers)},
        pipelines=(
            PipelineConfig(
                name="across", source_topics=(topic,), sink_topics=(topic,),
                sink_cluster="east", declared_semantic="exactly-once", claim="deadline",
                max_delay="1m",
            ),
        ),
    ).with_qualified_names()  # fmt: skip

    result = audit(spark, config, kafka.bootstrap_servers)

    east = f"east/{topic}"
    assert result.records == {topic: 2, east: 8}  # 3 committed, 3 aborted, 2 without an id
    assert result.transactional == (east,)
    rows = FingerprintStore(tmp_path).load(spark).collect()
    by_topic = {(r.topic, r.message_id): r.committed for r in rows if r.message_id}
    assert {k: v for k, v in by_topic.items() if k[0] == topic} == {
        (topic, "a-0"): True, (topic, "a-1"): True
    }  # fmt: skip
    assert {i: c for (t, i), c in by_topic.items() if t == east} == {
        "kept-0": True, "kept-1": True, "kept-2": True,
        "gone-0": False, "gone-1": False, "gone-2": False,
    }  # fmt: skip
    # Nothing new: the next audit reads nothing from either cluster.
    assert audit(spark, config, kafka.bootstrap_servers).records == {}
