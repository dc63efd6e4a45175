"""A pipeline reading one real topic, its config, one real collector cycle over the topic
(the offsets and producers samples the audit reads) and the fingerprints the audit stored:
what the audit tests run it on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from collectors.clients import Clients
from collectors.cycle import Collector
from dgm.config.collectors import CollectorSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.samples import SampleStore
from spark_jobs.audit.store import FingerprintStore


def pipeline(topic: str, **extra: Any) -> PipelineConfig:
    return PipelineConfig(
        name=extra.pop("name", "p"),
        source_topics=(topic,),
        sink_topics=extra.pop("sink_topics", ()),
        consumer_group="g",
        declared_semantic="exactly-once",
        **extra,
    )


def config(state_dir: Path, *pipelines: PipelineConfig) -> DgmConfig:
    return DgmConfig(state_dir=state_dir, pipelines=pipelines)


def sample(kafka: Any, state_dir: Path, *topics: str) -> None:
    """One real collector cycle over `topics`: the offsets and producers samples the audit
    reads."""
    clients = Clients(kafka.client_config(), request_timeout_s=10)
    include = tuple(f"^{re.escape(topic)}$" for topic in topics)
    settings = CollectorSettings(interval_s=1, include_topics=include)
    collector = Collector(clients, settings, SampleStore(state_dir), request_timeout_s=10)
    try:
        assert collector.cycle() is not None
    finally:
        clients.close()


def seen(spark: Any, state_dir: Path) -> list[tuple[int, str | None, bool]]:
    frame = FingerprintStore(state_dir).load(spark).orderBy("offset")
    return [(r.offset, r.message_id, r.committed) for r in frame.collect()]
