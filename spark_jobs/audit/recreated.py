"""Topics deleted and recreated under the same name, told apart by Kafka's topic id (KIP-516).

Each batch's manifest records the id of every topic it audited (`topic_ids`); the collectors
sample the current ids. When they differ, the topic was recreated: its old incarnation's
fingerprints and audited positions are dropped (the batches holding them are rewritten
without them, crash-safe like a compaction), so the new topic is audited from its start and
nothing is judged across the two. The collectors record the change as a `topic_recreated`
event, a fault of the topic's pipelines (docs/design.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_jobs.audit.batches import Batch, recorded_topic_ids
from spark_jobs.audit.rewrite import replace_batches
from spark_jobs.audit.store import FingerprintStore

Progress = Callable[[str], None]


def recreated_topics(
    recorded: Mapping[str, str], current: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """topic -> (audited id, current id) for the topics whose id changed; an unknown id on
    either side is no change."""
    return {
        topic: (recorded[topic], topic_id)
        for topic, topic_id in sorted(current.items())
        if topic in recorded and topic_id and recorded[topic] != topic_id
    }


def forget_topics(spark: SparkSession, state_dir: Path, topics: Collection[str]) -> Batch | None:
    """Rewrite the batches that hold any of `topics` as one batch without them (their rows,
    ranges and ids); call under the store's `writer_lock`. None when no batch holds them."""
    store = FingerprintStore(state_dir)
    batches = store.complete_batches()
    chosen = [b for b in batches if any(r["topic"] in topics for r in b.ranges)]
    if not chosen:
        return None
    other_topics = ~F.col("topic").isin(*sorted(topics))
    return replace_batches(store, spark, chosen, other_topics, topics)


def drop_recreated(
    spark: SparkSession, store: FingerprintStore, topic_ids: Mapping[str, str], progress: Progress
) -> dict[str, tuple[str, str]]:
    """The audit's step for recreated topics: those whose sampled `topic_ids` differ from the
    audited ones forgotten (recreated_topics' answer), so they are audited from their start.
    Call under the store's writer lock."""
    recreated = recreated_topics(recorded_topic_ids(store.complete_batches()), topic_ids)
    for topic, (old, new) in recreated.items():
        progress(
            f"audit: topic {topic} was deleted and recreated (id {old} -> {new}): its old "
            "fingerprints are dropped and the new topic is audited from its start"
        )
    if recreated:
        forget_topics(spark, store.state_dir, recreated)
    return recreated
