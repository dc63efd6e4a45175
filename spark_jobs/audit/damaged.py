"""The audit's step for damaged batches: the offsets of batches set aside as damaged
(FingerprintStore.set_aside_damaged) audited again, as one batch of their own, as far as
Kafka still holds them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import SparkSession

from dgm.config.document import DgmConfig
from dgm.contracts.samples import PartitionOffsets
from spark_jobs.audit.audit_ranges import audit_ranges
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.id_rules import topic_rules
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.ranges import OffsetRange, transactional_topics
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.audit.tracker import AuditTracker

Progress = Callable[[str], None]


def reaudit_damaged(
    spark: SparkSession,
    config: DgmConfig,
    sources: KafkaSources,
    sampled: Sequence[PartitionOffsets],
    topic_ids: Mapping[str, str],
    progress: Progress,
    samples: OffsetsSamples | None = None,
) -> None:
    """Audit again the damaged batches' offsets Kafka still holds (from each partition's
    sampled log start), their arrivals from `samples`; call under the store's writer lock."""
    damaged = FingerprintStore(config.state_dir).damaged_ranges()
    if not damaged:
        return
    rules = topic_rules(config)
    log_start = {(s.topic, s.partition): s.log_start_offset for s in sampled}
    again = []
    for r in (r for found in damaged.values() for r in found if r.topic in rules):
        start = max(r.start, log_start.get(r.key, r.start))
        if start < r.end:
            again.append(OffsetRange(r.topic, r.partition, start, r.end, start - r.start))
    progress(
        f"audit: {len(damaged)} damaged fingerprint batches: auditing their "
        f"{sum(r.size for r in again)} offsets again"
    )
    flagged = transactional_topics(config.state_dir, {r.topic for r in again})
    with AuditTracker(config.state_dir, sum(r.size for r in again), progress) as tracker:
        audit_ranges(
            spark, sources, again, rules, flagged, config.state_dir, tracker, topic_ids,
            reaudits=sorted(damaged), config=config, samples=samples,
        )  # fmt: skip
