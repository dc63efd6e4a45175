"""The audit's main step: the cycle's planned ranges audited into one batch. Topics the
cluster refuses to the audit are recorded as refusals (denials.py) and left out: the others
are audited, the refused ones read again once the permission is granted."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule
from dgm.contracts.clusters import SEPARATOR
from dgm.contracts.samples import PartitionOffsets
from spark_jobs.audit.audit_ranges import audit_ranges
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.denials import record_refusals, refused_topics
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.ranges import OffsetRange, flagged_topics
from spark_jobs.audit.tracker import AuditTracker

Progress = Callable[[str], None]


@dataclass(frozen=True)
class NewRanges:
    """What the step audited."""

    ranges: tuple[OffsetRange, ...]  # the planned ranges but the refused topics'
    batch: Batch | None  # None when there was nothing to audit
    transactional: tuple[str, ...]  # topics read as transactional (aborted records marked)


def audit_new_ranges(
    spark: SparkSession,
    config: DgmConfig,
    sources: KafkaSources,
    planned: Sequence[OffsetRange],
    rules: Mapping[str, MessageIdRule],
    sampled: Sequence[PartitionOffsets],
    newest: int,
    topic_ids: Mapping[str, str],
    records: dict[str, int],
    progress: Progress,
    progress_every_s: float,
    samples: OffsetsSamples | None = None,
) -> NewRanges:
    """Audit `planned` as one batch, a progress line at least every `progress_every_s`
    seconds; `records` gets the records per topic. `newest`: the sample files to look at
    for transactions; `samples`: the offsets samples the records' arrivals are set from.
    Call under the store's writer lock."""
    _report_skipped(planned, config.analysis.start, progress)
    ranges = list(planned)
    if not ranges:
        return NewRanges((), None, ())
    state_dir = config.state_dir
    topics = {r.topic for r in ranges}
    flagged = flagged_topics(state_dir, topics, sampled, newest)
    batch: Batch | None = None
    transactional: tuple[str, ...] = ()
    total = sum(r.size for r in ranges)
    with AuditTracker(state_dir, total, progress, progress_every_s) as tracker:
        try:
            batch, transactional = audit_ranges(
                spark, sources, ranges, rules, flagged, state_dir, tracker, topic_ids,
                config=config, samples=samples,
            )  # fmt: skip
        except Exception as error:
            # Spark's error names the topic as its cluster knows it.
            named = set(refused_topics(error))
            refused = {t for t in topics if t.rpartition(SEPARATOR)[2] in named}
            if not refused:
                raise
            for denial in record_refusals(state_dir, sorted(refused)):
                progress(f"audit: {denial.line()}: its records are not audited")
            ranges = [r for r in ranges if r.topic not in refused]
            topics -= refused
            if ranges:
                batch, transactional = audit_ranges(
                    spark, sources, ranges, rules, flagged, state_dir, tracker, topic_ids,
                    config=config, samples=samples,
                )  # fmt: skip
    for topic in sorted(topics):
        mine = [r for r in (batch.ranges if batch else []) if r["topic"] == topic]
        records[topic] = sum(int(r["records"]) for r in mine)
        twice = ", aborted records marked" if topic in transactional else ""
        progress(f"audit: topic {topic}: {records[topic]} records in {len(mine)} partitions{twice}")
    return NewRanges(tuple(ranges), batch, transactional)


def _report_skipped(ranges: Iterable[OffsetRange], start: str, progress: Progress) -> None:
    for r in ranges:
        where = f"audit: topic {r.topic} partition {r.partition}"
        if r.skipped:
            progress(
                f"{where}: {r.skipped} offsets deleted by retention before they were audited "
                f"(up to {r.start})"
            )
        if r.before_start:
            progress(
                f"{where}: first audit starts at offset {r.start} (analysis.start = {start!r}); "
                f"the {r.before_start} offsets before it are never audited"
            )
