"""The fingerprints of an audit's offset ranges: each chunk read (read_uncommitted, headers
included, one relation per id rule), fingerprinted and written to Parquet in one Spark job
(scratch.py) and counted from its files. The aborted records of the topics that have seen
transactions are told by their batches' markers before the read and marked in it
(aborted_batches.py); a topic the markers could not tell is read again, read_committed,
without headers, and its aborted records marked after (aborted_marking.py). Each record's
arrival is set in the same read from the collectors' LSO samples (arrivals.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule
from dgm.contracts.samples import Key
from spark_jobs.audit.aborted_batches import Spans, told_aborts
from spark_jobs.audit.aborted_marking import aborted_offsets, mark_aborted, mark_aborted_spans
from spark_jobs.audit.arrivals import needed, segments, with_arrivals
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.expected import with_expected
from spark_jobs.audit.kafka_source import read_ranges, union
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.ranges import OffsetRange, split_ranges
from spark_jobs.audit.record_columns import fingerprints
from spark_jobs.audit.registry_columns import batch_schemas, registry_lookups
from spark_jobs.audit.schema_events import SchemaEvents
from spark_jobs.audit.scratch import Scratch
from spark_jobs.audit.store import FingerprintStore, empty_fingerprints
from spark_jobs.audit.tracker import AuditTracker
from spark_jobs.audit.unidentified import ReasonCounts, lines
from spark_jobs.sampling import kept

# Offsets read per Spark job: the audit's progress is exact at each chunk's end. Each chunk
# costs about 1.5 s more than the records it reads on 2 cores (1M records in chunks of 200k:
# 13.9 s, in one chunk 8.4 s: bench/HISTORY.md, "Audit: throughput against the engine's
# floor"), so a chunk is ~8 s of reading there; the progress line still comes every 10 s.
CHUNK_OFFSETS = 1_000_000
# A chunk of at most this many offsets is read by one task per core (read_chunks).
FEW_OFFSETS = 50_000
# aborted_spans_frame's rows: aborted batches' offsets, inclusive.
SPANS = "topic string, partition int, first long, last long"
# Aborted records up to this many are sent whole to every task to be marked (~30 bytes
# each); more (a producer aborting in a loop) are joined by shuffling the fingerprints.
BROADCAST_ABORTED = 2_000_000


def read_chunks(
    spark: SparkSession,
    sources: KafkaSources,
    ranges: Sequence[OffsetRange],
    rules: Mapping[str, MessageIdRule],
    tracker: AuditTracker,
    chunk_offsets: int,
    scratch: Scratch,
    config: DgmConfig | None = None,
    aborted: DataFrame | None = None,
    arrivals: pa.Table | None = None,
) -> dict[Key, int]:
    """Write the read_uncommitted fingerprints of `ranges` to `scratch`, a job per chunk,
    each counted from its files before the next is read: the tracker learns exact figures.
    `aborted`: spans (aborted_spans_frame) whose records are written not committed;
    `arrivals`: the LSO's segments (arrivals.segments) the records' arrivals are set from.
    Records per partition."""
    counts: dict[Key, int] = {}
    unidentified: Counter[tuple[str, str]] = Counter()
    lookups = registry_lookups(config)
    # A schema the registry does not give is an event, besides its records' reason.
    events = None if config is None else SchemaEvents(config.state_dir, config.clusters)
    for chunk in split_ranges(ranges, chunk_offsets):
        # One Kafka relation per id rule (and schema registry), not per topic: each relation
        # costs the driver its own offset reader and planning, every cycle.
        by_rule: dict[tuple[MessageIdRule, Any], list[OffsetRange]] = {}
        for r in chunk:
            by_rule.setdefault((rules[r.topic], lookups(r.topic)), []).append(r)
        frames, observed = [], []
        for (rule, lookup), mine in by_rule.items():
            records = read_ranges(spark, sources, mine, "read_uncommitted")
            schemas = batch_schemas(records, rule, lookup)
            if config is not None:  # the schemas fetched for the ids serve `fields` too
                records = with_expected(records, config, lookup, schemas)
            topics = sorted({r.topic for r in mine})
            if events is not None:
                events.told(records, topics, schemas)
            reasons = ReasonCounts(topics) if schemas is not None else None
            observed += [reasons] if reasons is not None else []
            frames.append(fingerprints(records, rule, schemas, reasons))
        frame = union(frames)
        if aborted is not None:
            frame = mark_aborted_spans(frame, aborted)
        # Only the chunk's segments are sent to its tasks.
        if arrivals is not None and (mine := needed(arrivals, chunk)).num_rows:
            frame = with_arrivals(frame, spark.createDataFrame(mine))
        if sum(r.size for r in chunk) <= FEW_OFFSETS:
            # A few records (a demo's cycle): read by a task per core, not one per Kafka
            # partition, each of which cost ~0.1 s and wrote its own small file.
            frame = frame.coalesce(spark.sparkContext.defaultParallelism)
        counted = scratch.write(frame)
        for key, rows in counted.items():
            counts[key] = counts.get(key, 0) + rows
        tracker.add(sum(counted.values()), sum(r.size for r in chunk))
        for reasons in observed:
            unidentified.update(reasons.counts())
    # Why records have no id: an operator's first question when the count is not zero.
    for line in lines(unidentified):
        tracker.log(line)
    return counts


def aborted_spans_frame(spark: SparkSession, told: Mapping[str, Spans]) -> DataFrame | None:
    """The aborted spans the markers told (topic, partition, first, last), adjacent ones
    merged; None when there are none, so nothing is joined."""
    rows: list[tuple[str, int, int, int]] = []
    for topic, partitions in sorted(told.items()):
        for partition, spans in sorted(partitions.items()):
            merged: list[list[int]] = []
            for first, last in sorted(spans):
                if merged and first <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], last)
                else:
                    merged.append([first, last])
            rows.extend((topic, partition, first, last) for first, last in merged)
    if not rows:
        return None
    return spark.createDataFrame(rows, SPANS)


@dataclass
class Fingerprinted:
    """The fingerprints of an audit's ranges, as `frame` (committed or aborted; with a config,
    source records marked by the pipelines' `expected` predicates and sampled topics' kept
    ids only). `files`: the part files `frame` is exactly, when it needed nothing past the
    first read (the batch adopts them); None when it must be written. Call `done` once it
    is written."""

    frame: DataFrame
    transactional: tuple[str, ...]
    files: list[Path] | None
    scratch: Scratch

    def done(self) -> None:
        self.scratch.remove()


def fingerprinted(
    spark: SparkSession,
    sources: KafkaSources,
    ranges: Sequence[OffsetRange],
    rules: Mapping[str, MessageIdRule],
    flagged: set[str],
    tracker: AuditTracker,
    state_dir: Path,
    chunk_offsets: int = CHUNK_OFFSETS,
    config: DgmConfig | None = None,
    samples: OffsetsSamples | None = None,
) -> Fingerprinted:
    """The fingerprints of `ranges` (Fingerprinted); `flagged` topics are read twice. With
    `samples`, the records' arrivals are set from their LSO history."""
    reading = [r for r in ranges if r.size > 0]
    topics = sorted({r.topic for r in reading})
    # The topics the collectors saw transactions on: their aborted records told by the
    # markers and marked in the one read; the others found gapped after it are read twice.
    told, _ = told_aborts(sources, [r for r in reading if r.topic in flagged])
    history = samples.history({r.key: r.start for r in reading}) if samples else None
    scratch = Scratch(FingerprintStore(state_dir).folder)
    try:
        counts = read_chunks(
            spark, sources, reading, rules, tracker, chunk_offsets, scratch, config,
            aborted_spans_frame(spark, told), None if history is None else segments(history),
        )  # fmt: skip
        tracker.set_phase("writing")
        uncommitted = scratch.frame(spark) if scratch.chunks else empty_fingerprints(spark)
        gapped = {r.topic for r in reading if counts.get(r.key, 0) < r.size}
        transactional = sorted((flagged | gapped) & set(topics))
        reread = [t for t in transactional if t not in told]
        # A sampled topic keeps its kept ids only (dgm/contracts/sampling.py), after the committed
        # pass.
        one_in = config.topic_one_in() if config is not None else {}
        sampled = {t for t in topics if one_in.get(t, 1) > 1}
        if not reread and not sampled:
            # Nothing read (a first audit's recorded start): the batch writes its empty frame,
            # so every batch holds a Parquet file with the schema, as before.
            adopted = scratch.files() if scratch.chunks else None
            return Fingerprinted(uncommitted, tuple(transactional), adopted, scratch)
        parts = [uncommitted.filter(~F.col("topic").isin(reread))]
        if reread:
            in_txn = [r for r in reading if r.topic in reread]
            committed_view = read_ranges(
                spark, sources, in_txn, "read_committed", include_headers=False
            )
            mine = uncommitted.filter(F.col("topic").isin(reread))
            # Materialized once: their number decides whether they are broadcast.
            aborted = scratch.write_aborted(aborted_offsets(mine, committed_view))
            broadcast = aborted <= BROADCAST_ABORTED
            parts.append(mark_aborted(mine, scratch.aborted(spark), broadcast))
    except BaseException:
        scratch.remove()
        raise
    return Fingerprinted(kept(union(parts), one_in), tuple(transactional), None, scratch)
