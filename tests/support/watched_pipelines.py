"""Pipelines whose sink topic a watch test reads."""

from __future__ import annotations

from dgm.config.pipelines import MessageIdRule, PipelineConfig


def sink_pipeline(name: str, sink: str, rule: MessageIdRule | None = None) -> PipelineConfig:
    """A pipeline writing `sink` (its source and group are never read by the watch)."""
    return PipelineConfig(
        name=name,
        source_topics=(f"{name}-source",),
        sink_topics=(sink,),
        consumer_group=f"{name}-group",
        declared_semantic="exactly-once",
        message_id=rule or MessageIdRule(),
    )
