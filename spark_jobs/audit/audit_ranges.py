"""Offset ranges audited into one committed batch: read and fingerprinted (chunked_read.py),
then written by the store with the manifest that records them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.chunked_read import CHUNK_OFFSETS, fingerprinted
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.expected import recorded_predicates
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.audit.tracker import AuditTracker


def audit_ranges(
    spark: SparkSession,
    sources: KafkaSources,
    ranges: Sequence[OffsetRange],
    rules: Mapping[str, MessageIdRule],
    flagged: set[str],
    state_dir: Path,
    tracker: AuditTracker,
    topic_ids: Mapping[str, str],
    chunk_offsets: int = CHUNK_OFFSETS,
    reaudits: Sequence[str] = (),
    config: DgmConfig | None = None,
    samples: OffsetsSamples | None = None,
) -> tuple[Batch, tuple[str, ...]]:
    """One batch for `ranges`, and the topics read as transactional; empty ranges (a first
    audit's recorded start) are stored in the manifest without a read. With `config`, source
    records are marked by the pipelines' `expected` predicates and the manifest records
    them; with `samples`, the records' arrivals are set from their LSO history. Call under
    the store's writer lock."""
    found = fingerprinted(
        spark, sources, ranges, rules, flagged, tracker, state_dir, chunk_offsets, config,
        samples,
    )  # fmt: skip
    try:
        used = {t: rules[t] for t in sorted({r.topic for r in ranges})}
        store = FingerprintStore(state_dir)
        judged = recorded_predicates(config, {r.topic for r in ranges}) if config else {}
        batch = store.write_batch(
            spark, found.frame, ranges, used, (), topic_ids, reaudits, expected=judged,
            files=found.files,
        )  # fmt: skip
    finally:
        found.done()
    return batch, found.transactional
