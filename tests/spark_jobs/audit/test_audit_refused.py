"""The audit refused a topic (no Read): it records what it cannot see and audits the rest."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.clients.permissions import AUTHORIZATION_FAILED, TOPIC_DESCRIBE, TOPIC_READ, Denial
from dgm.config.cluster import ClusterConfig
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.samples import SampleStore
from spark_jobs.audit.audit import audit
from tests.support.secured_kafka import DGM_USER, SecuredKafka, acl, topic_with_records


def test_a_refused_topic_is_recorded_and_the_others_are_audited(
    kafka_sasl: SecuredKafka, spark: Any, tmp_path: Path
) -> None:
    readable, refused = topic_with_records(kafka_sasl), topic_with_records(kafka_sasl)
    # The samples come from a principal that sees everything (here the admin), the audit
    # reads as dgm, which may describe both topics but read only one.
    admin = Clients({"bootstrap.servers": kafka_sasl.bootstrap_servers,
                     **kafka_sasl.admin_config()}, 10)  # fmt: skip
    include = tuple(f"^{re.escape(t)}$" for t in (readable, refused))
    store = SampleStore(tmp_path)
    try:
        assert Collector(admin, CollectorSettings(include_topics=include), store, 10).cycle()
    finally:
        admin.close()
    granted = [
        acl(DGM_USER, TOPIC_DESCRIBE, readable),
        acl(DGM_USER, TOPIC_READ, readable),
        acl(DGM_USER, TOPIC_DESCRIBE, refused),
    ]
    kafka_sasl.grant(granted)
    pipelines = tuple(
        PipelineConfig(name=f"p{i}", source_topics=(t,), sink_topics=(t,), consumer_group="g",
                       declared_semantic="at-least-once")
        for i, t in enumerate((readable, refused))
    )  # fmt: skip
    config = DgmConfig(
        state_dir=tmp_path,
        cluster=ClusterConfig(client=kafka_sasl.scram_client()),
        pipelines=pipelines,
    )
    lines: list[str] = []
    try:
        result = audit(spark, config, kafka_sasl.bootstrap_servers, progress=lines.append)
        again = audit(spark, config, kafka_sasl.bootstrap_servers, progress=lines.append)
    finally:
        kafka_sasl.revoke(granted)
    assert result.records == {readable: 3}
    assert {r.topic for r in result.ranges} == {readable}  # the refused one stays to audit
    assert again.records == {}  # nothing new where dgm may read
    denial = Denial(TOPIC_READ, refused).line()
    events = store.read("events").to_pylist()
    recorded = [e for e in events if e["event"] == AUTHORIZATION_FAILED]
    assert [(e["detail"], e["topic"]) for e in recorded] == [(denial, refused)]  # once
    assert f"audit: {denial}: its records are not audited" in lines
