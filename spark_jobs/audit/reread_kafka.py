"""The audit's re-read step (truncation.py, reread.py) given its Kafka reads: the records of
the ranges it reads again as they are now, and the fingerprints of those it rewrites."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession

from dgm.config.document import DgmConfig
from dgm.contracts.samples import PartitionOffsets, SampleStore
from spark_jobs.audit.chunked_read import fingerprinted
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.id_rules import topic_rules
from spark_jobs.audit.kafka_source import read_ranges
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.ranges import OffsetRange, flagged_topics
from spark_jobs.audit.registry_columns import registry_lookups
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.audit.tracker import AuditTracker
from spark_jobs.audit.truncation import RereadReport, reread

Progress = Callable[[str], None]


def new_offsets(sampled: Sequence[PartitionOffsets], store: FingerprintStore) -> int:
    """The offsets between what was audited and each partition's sampled LSO: what a cycle's
    re-read share is a share of."""
    audited = store.audited_positions()
    return sum(
        max(0, s.lso - audited[key]) for s in sampled if (key := (s.topic, s.partition)) in audited
    )


def reread_audited(
    spark: SparkSession,
    config: DgmConfig,
    sources: KafkaSources,
    sampled: Sequence[PartitionOffsets],
    newest: int,
    store: FingerprintStore,
    progress: Progress,
    share: float,
    offsets: int,
    samples: OffsetsSamples | None = None,
) -> RereadReport:
    """Read part of the audited offsets again (around backwards moves, and `share` of the new
    `offsets`) and rewrite the partitions found truncated (audit/truncation.py); call under
    the store's writer lock. `newest`: the sample files to look at for transactions;
    `samples`: the offsets samples the rewritten records' arrivals are set from."""
    rules = topic_rules(config)

    def read(ranges: Sequence[OffsetRange]) -> DataFrame:
        return read_ranges(spark, sources, ranges, "read_uncommitted")

    def fingerprint(ranges: Sequence[OffsetRange]) -> tuple[DataFrame, Callable[[], None]]:
        flagged = flagged_topics(config.state_dir, {r.topic for r in ranges}, sampled, newest)
        total = sum(r.size for r in ranges)
        with AuditTracker(config.state_dir, total, progress) as tracker:
            found = fingerprinted(
                spark, sources, ranges, rules, flagged, tracker, config.state_dir,
                config=config, samples=samples,
            )  # fmt: skip
        return found.frame, found.done

    return reread(
        spark, store, SampleStore(config.state_dir), sampled, rules,
        share, offsets, read, fingerprint, progress, lookups=registry_lookups(config),
    )  # fmt: skip
