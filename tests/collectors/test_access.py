"""Refusals the samplers meet, against a broker that enforces ACLs: recorded once as events,
their end too, published as what dgm cannot see."""

from __future__ import annotations

import uuid
from pathlib import Path

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.clients.permissions import (
    AUTHORIZATION_FAILED,
    AUTHORIZATION_RESTORED,
    CLUSTER_DESCRIBE_CONFIGS,
    GROUP_DESCRIBE,
    TOPIC_DESCRIBE,
    TOPIC_READ,
    TRANSACTIONAL_ID_DESCRIBE,
    Denial,
)
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.published import open_read_only
from dgm.contracts.published_views import read_missing_permissions
from dgm.contracts.samples import SampleStore
from spark_jobs.analyze.faults import faults
from tests.support.published_rows import publish
from tests.support.secured_kafka import DGM_USER, SecuredKafka, acl


def refusals(store: SampleStore) -> list[tuple[str, str]]:
    events = store.read("events").to_pylist()
    kinds = (AUTHORIZATION_FAILED, AUTHORIZATION_RESTORED)
    return [(e["event"], e["detail"]) for e in events if e["event"] in kinds]


def test_refusals_are_events_once_and_so_is_their_end(
    kafka_sasl: SecuredKafka, tmp_path: Path
) -> None:
    topic, group = kafka_sasl.new_topic("refused"), f"g-{uuid.uuid4().hex[:8]}"
    # dgm may see the topic's offsets, not its records nor its group.
    granted = [
        acl(DGM_USER, TOPIC_DESCRIBE, topic),
        acl(DGM_USER, TRANSACTIONAL_ID_DESCRIBE, "*"),
        acl(DGM_USER, CLUSTER_DESCRIBE_CONFIGS),
    ]
    kafka_sasl.grant(granted)
    clients = Clients(
        {"bootstrap.servers": kafka_sasl.bootstrap_servers, **kafka_sasl.scram_client()}, 10
    )
    store = SampleStore(tmp_path)
    settings = CollectorSettings(include_topics=(f"^{topic}$",))
    collector = Collector(
        clients, settings, store, 10, expected_topics=(topic,), expected_groups=(group,)
    )
    read, described = Denial(TOPIC_READ, topic).line(), Denial(GROUP_DESCRIBE, group).line()
    try:
        summary = collector.cycle()
        assert summary is not None and summary.partitions == 1  # its offsets are sampled
        collector.cycle()  # still refused: nothing new to record
        assert sorted(refusals(store)) == [
            (AUTHORIZATION_FAILED, d) for d in sorted([read, described])
        ]

        kafka_sasl.grant([acl(DGM_USER, TOPIC_READ, topic)])
        collector.cycle()
        assert refusals(store)[-1] == (AUTHORIZATION_RESTORED, read)

        pipeline = PipelineConfig(
            name="p",
            source_topics=(topic,),
            sink_topics=(topic,),
            consumer_group=group,
            declared_semantic="at-least-once",
        )
        config = DgmConfig(pipelines=(pipeline,))
        rows = faults(config, store.read("events"), store.read("producers"))
        path = publish(tmp_path / "published", {"faults": rows.to_pylist()})
        with open_read_only(path) as db:
            assert read_missing_permissions(db) == [described]
    finally:
        clients.close()
        kafka_sasl.revoke([*granted, acl(DGM_USER, TOPIC_READ, topic)])
