"""The audit's step for changed predicates: the source topics whose pipeline's `expected`
predicate is not the one they were audited under are audited again under the new one
(docs/design.md, "Definitions", filtered)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession

from dgm.config.document import DgmConfig
from dgm.contracts.samples import Key
from spark_jobs.audit.expected import stale_topics
from spark_jobs.audit.recreated import forget_topics
from spark_jobs.audit.store import FingerprintStore

Progress = Callable[[str], None]


def rejudge_changed_predicates(
    spark: SparkSession, config: DgmConfig, store: FingerprintStore, progress: Progress
) -> dict[Key, int]:
    """Forget the fingerprints of the source topics whose pipeline's `expected` predicate is
    not the one they were audited under (they carry the old predicate's evaluation), so they
    are audited again under the new one; (topic, partition) -> where their audit began.
    Call under the store's writer lock."""
    stale = stale_topics(config, store.complete_batches())
    if not stale:
        return {}
    starts: dict[Key, int] = {}
    for batch in store.complete_batches():
        for r in batch.ranges:
            if r["topic"] in stale:
                key = (r["topic"], r["partition"])
                starts[key] = min(starts.get(key, r["start"]), r["start"])
    for topic, pipelines in sorted(stale.items()):
        progress(
            f"audit: topic {topic}: the expected predicate of pipeline "
            f"{', '.join(sorted(pipelines))} changed since it was audited: its fingerprints are "
            "dropped and it is audited again under the new predicate, from where its audit "
            "began (offsets Kafka has deleted since are no longer judged)"
        )
    forget_topics(spark, config.state_dir, set(stale))
    return starts
