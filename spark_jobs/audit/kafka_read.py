"""`audit`: fingerprint each monitored topic's new offset range, exactly once per range.

The ranges come from the newest `offsets` sample and the audited positions the stored
batches' manifests hold (the ranges and fingerprint_store modules beside this one). The
ranges are read with the Spark Kafka source in batch mode, read_uncommitted, headers included,
one relation per message id rule (all the topics that share a rule in one read), and
fingerprinted with that rule. The topics that have seen transactions are also read
read_committed, in one relation over the same ranges, and their fingerprints marked committed
or aborted (only the coordinates of the aborted records are joined: fingerprint.py).
Each chunk of the ranges is read, fingerprinted and written to Parquet in one Spark job, and
counted from its files on the driver; a batch that needs no marking and drops no ids adopts
those files (scratch.py), so a topic without transactions is read and written once.
"Has seen transactions" is decided from the data: a partition whose read_uncommitted read
returned fewer records than its range has offsets (control markers take offsets); an LSO
sampled below the high watermark; or a transactional producer in the `producers` sample.
Everything goes into one batch: the whole audit commits or none of it does.
External sink files (SQLite, DuckDB) are read whole each run and stored as a snapshot per
pipeline; PostgreSQL/JDBC sinks are read incrementally into a batch of their own
(jdbc_audit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.clusters import DEFAULT_CLUSTER, SEPARATOR, qualified
from dgm.config_schema import FILE_KINDS, DgmConfig, MessageIdRule, id_rule_conflicts
from dgm.errors import UserFacingError
from dgm.samples import Key, PartitionOffsets, SampleStore
from spark_jobs.audit.cluster_sources import (
    KafkaSources,
    cluster_kafka_options,
    kafka_sources,
)
from spark_jobs.audit.denials import record_refusals, refused_topics
from spark_jobs.audit.expected import (
    check_predicates,
    recorded_predicates,
    stale_topics,
    with_expected,
)
from spark_jobs.audit.external import external_fingerprints
from spark_jobs.audit.fingerprint import aborted_offsets, fingerprints, mark_aborted
from spark_jobs.audit.fingerprint_store import (
    Batch,
    FingerprintStore,
    empty_fingerprints,
    recorded_topic_ids,
)
from spark_jobs.audit.jdbc_audit import audit_jdbc
from spark_jobs.audit.ranges import (
    MAX_SAMPLE_FILES,
    OffsetRange,
    assign_json,
    has_open_or_recent_transaction,
    latest_offsets,
    latest_topic_ids,
    offsets_json,
    plan_ranges,
    split_ranges,
    transactional_topics,
)
from spark_jobs.audit.recreated import forget_topics, recreated_topics
from spark_jobs.audit.scratch import Scratch
from spark_jobs.audit.start import first_starts
from spark_jobs.audit.tracker import EVERY_S, AuditTracker
from spark_jobs.audit.truncation import RereadReport, reread
from spark_jobs.sampling import kept

Progress = Callable[[str], None]
# Offsets read per Spark job: the audit's progress is exact at each chunk's end. Each chunk
# costs about 1.5 s more than the records it reads on 2 cores (1M records in chunks of 200k:
# 13.9 s, in one chunk 8.4 s: bench/HISTORY.md, "Audit: throughput against the engine's
# floor"), so a chunk is ~8 s of reading there; the progress line still comes every 10 s.
CHUNK_OFFSETS = 1_000_000
# Aborted records up to this many are sent whole to every task to be marked (~30 bytes
# each); more (a producer aborting in a loop) are joined by shuffling the fingerprints.
BROADCAST_ABORTED = 2_000_000


class ConflictingIdRules(UserFacingError):
    """Two pipelines monitor one topic with different message id rules."""


@dataclass(frozen=True)
class AuditResult:
    # Records fingerprinted per topic (external sinks under their 'external:...' name).
    records: dict[str, int]
    # The Kafka offset ranges audited (with the offsets retention deleted before the audit).
    ranges: tuple[OffsetRange, ...]
    # The committed batch; None when there was nothing new in Kafka.
    batch: Path | None
    seconds: float
    # Topics read twice (read_uncommitted and read_committed) because they saw transactions.
    transactional: tuple[str, ...] = ()
    # Pipeline -> its external sink snapshot (file sinks).
    external: dict[str, Path] = field(default_factory=dict)
    # The batch of the rows the JDBC sinks added; None when they added none.
    jdbc_batch: Path | None = None
    # What was read again of the audited offsets around backwards moves, and the truncations
    # it found (the share of the cycle is read again after publishing: reread_share).
    reread: RereadReport | None = None
    # Offsets this audit read past what was audited before: what the share is a share of.
    new_offsets: int = 0

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.ranges)


def topic_rules(config: DgmConfig) -> dict[str, MessageIdRule]:
    """Every monitored topic (any pipeline's source or sink topic) and its id rule: a source
    topic takes its pipeline's source rule, a sink topic the sink rule (PipelineConfig)."""
    for _, problem in id_rule_conflicts(config.pipelines):
        raise ConflictingIdRules(problem)
    rules: dict[str, MessageIdRule] = {}
    for pipeline in config.pipelines:
        for topic, rule, _ in pipeline.topic_id_rules():
            rules.setdefault(topic, rule)
    return dict(sorted(rules.items()))


def kafka_options(config: DgmConfig, bootstrap_servers: str) -> dict[str, str]:
    """Spark Kafka source options reaching the default cluster. They may hold secrets: never
    log."""
    return cluster_kafka_options(config.cluster, bootstrap_servers)


def read_range(
    spark: SparkSession,
    options: Mapping[str, str],
    ranges: Sequence[OffsetRange],
    isolation: str,
    include_headers: bool = True,
) -> DataFrame:
    """The records of `ranges` as the Spark Kafka source gives them, headers included.

    failOnDataLoss stays true for both isolation levels. Spark's source itself skips offsets
    a read_committed consumer cannot see (markers, aborted records): tested on Kafka 4.1.1,
    including a range that ends in an abort marker. So offsets that retention deletes between
    sampling and reading fail the audit (the next sample's log start moves past them) rather
    than vanish, or, in the read_committed view, pass for aborted records.
    """
    return (
        spark.read.format("kafka")
        .options(**options)
        .option("assign", assign_json(ranges))
        .option("startingOffsets", offsets_json(ranges, end=False))
        .option("endingOffsets", offsets_json(ranges, end=True))
        .option("includeHeaders", str(include_headers).lower())
        .option("kafka.isolation.level", isolation)
        .option("failOnDataLoss", "true")
        .load()
    )


def read_ranges(
    spark: SparkSession,
    sources: KafkaSources,
    ranges: Sequence[OffsetRange],
    isolation: str,
    include_headers: bool = True,
) -> DataFrame:
    """read_range of each cluster's share of `ranges` with that cluster's options, the topics
    named as dgm names them (qualified off the default cluster): one relation per cluster."""
    frames = []
    for cluster, plain in sources.by_cluster(ranges).items():
        frame = read_range(spark, sources.options[cluster], plain, isolation, include_headers)
        if cluster != DEFAULT_CLUSTER:
            prefix = F.lit(qualified(cluster, ""))
            frame = frame.withColumn("topic", F.concat(prefix, F.col("topic")))
        frames.append(frame)
    return _union(frames)


def _union(frames: Iterable[DataFrame]) -> DataFrame:
    return reduce(DataFrame.unionByName, frames)


def _read_chunks(
    spark: SparkSession,
    sources: KafkaSources,
    ranges: Sequence[OffsetRange],
    rules: Mapping[str, MessageIdRule],
    tracker: AuditTracker,
    chunk_offsets: int,
    scratch: Scratch,
    config: DgmConfig | None = None,
) -> dict[Key, int]:
    """Write the read_uncommitted fingerprints of `ranges` to `scratch`, a job per chunk,
    each counted from its files before the next is read: the tracker learns exact figures.
    Records per partition."""
    counts: dict[Key, int] = {}
    for chunk in split_ranges(ranges, chunk_offsets):
        # One Kafka relation per id rule, not per topic: each relation costs the driver
        # its own offset reader and planning, every cycle.
        by_rule: dict[MessageIdRule, list[OffsetRange]] = {}
        for r in chunk:
            by_rule.setdefault(rules[r.topic], []).append(r)
        frame = _union(
            fingerprints(
                _expected(read_ranges(spark, sources, mine, "read_uncommitted"), config), rule
            )
            for rule, mine in by_rule.items()
        )
        counted = scratch.write(frame)
        for key, rows in counted.items():
            counts[key] = counts.get(key, 0) + rows
        tracker.add(sum(counted.values()), sum(r.size for r in chunk))
    return counts


def _expected(records: DataFrame, config: DgmConfig | None) -> DataFrame:
    return records if config is None else with_expected(records, config)


def _fingerprint_kafka(
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
) -> tuple[Batch, tuple[str, ...]]:
    """One batch for `ranges`; empty ranges (a first audit's recorded start) are stored in
    the manifest without a read. With `config`, source records are marked by the pipelines'
    `expected` predicates and the manifest records them."""
    found = fingerprinted(
        spark, sources, ranges, rules, flagged, tracker, state_dir, chunk_offsets, config
    )
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
) -> Fingerprinted:
    """The fingerprints of `ranges` (Fingerprinted); `flagged` topics are read twice."""
    reading = [r for r in ranges if r.size > 0]
    topics = sorted({r.topic for r in reading})
    scratch = Scratch(FingerprintStore(state_dir).folder)
    try:
        counts = _read_chunks(
            spark, sources, reading, rules, tracker, chunk_offsets, scratch, config
        )
        tracker.set_phase("writing")
        uncommitted = scratch.frame(spark) if scratch.chunks else empty_fingerprints(spark)
        gapped = {r.topic for r in reading if counts.get(r.key, 0) < r.size}
        transactional = sorted((flagged | gapped) & set(topics))
        # A sampled topic keeps its kept ids only (dgm/sampling.py), after the committed pass.
        one_in = config.topic_one_in() if config is not None else {}
        sampled = {t for t in topics if one_in.get(t, 1) > 1}
        if not transactional and not sampled:
            # Nothing read (a first audit's recorded start): the batch writes its empty frame,
            # so every batch holds a Parquet file with the schema, as before.
            adopted = scratch.files() if scratch.chunks else None
            return Fingerprinted(uncommitted, (), adopted, scratch)
        parts = [uncommitted.filter(~F.col("topic").isin(transactional))]
        if transactional:
            in_txn = [r for r in reading if r.topic in transactional]
            committed_view = read_ranges(
                spark, sources, in_txn, "read_committed", include_headers=False
            )
            mine = uncommitted.filter(F.col("topic").isin(transactional))
            # Materialized once: their number decides whether they are broadcast.
            aborted = scratch.write_aborted(aborted_offsets(mine, committed_view))
            broadcast = aborted <= BROADCAST_ABORTED
            parts.append(mark_aborted(mine, scratch.aborted(spark), broadcast))
    except BaseException:
        scratch.remove()
        raise
    return Fingerprinted(kept(_union(parts), one_in), tuple(transactional), None, scratch)


def _quiet(_: str) -> None:
    pass


def audit(
    spark: SparkSession,
    config: DgmConfig,
    bootstrap_servers: str,
    progress: Progress = _quiet,
    progress_every_s: float = EVERY_S,
    now: datetime | None = None,
) -> AuditResult:
    """Fingerprint what is new since the last audit, store it as one batch, snapshot the
    external sinks. Safe to kill at any point and to run again. While Kafka is read, a
    progress line (records, rate, ETA) comes at least every `progress_every_s` seconds.
    `bootstrap_servers` are the default cluster's; every topic is read from its own cluster
    (cluster_sources)."""
    began = time.monotonic()
    rules = topic_rules(config)
    check_predicates(spark, config)
    state_dir = config.state_dir
    records: dict[str, int] = {}
    batch: Batch | None = None
    transactional: tuple[str, ...] = ()
    store = FingerprintStore(state_dir)
    with store.writer_lock():
        sources = kafka_sources(config, bootstrap_servers)
        # Each cluster's collector writes its own sample files: look as far back per cluster.
        newest = MAX_SAMPLE_FILES * len(sources.options)
        sampled = latest_offsets(state_dir, rules, newest)
        topic_ids = latest_topic_ids(state_dir, rules, newest)
        recreated = recreated_topics(recorded_topic_ids(store.complete_batches()), topic_ids)
        for topic, (old, new) in recreated.items():
            progress(
                f"audit: topic {topic} was deleted and recreated (id {old} -> {new}): its old "
                "fingerprints are dropped and the new topic is audited from its start"
            )
        if recreated:
            forget_topics(spark, state_dir, recreated)
        rejudged = _rejudge_changed_predicates(spark, config, store, progress)
        new_offsets = _new_offsets(sampled, store)
        # Only around backwards moves here: they must be re-read before the audit goes on
        # from a truncated partition. The share waits until the cycle has published
        # (reread_share), off the path from a record to the dashboard.
        rereads = _reread(spark, config, sources, sampled, newest, store, progress, 0.0, 0)
        audited = store.audited_positions()
        starts = first_starts(
            config.analysis.start,
            sampled,
            audited,
            now or datetime.now(UTC),
            sources.offsets_for_times(),
        )
        # A recreated topic is audited from its start, whatever analysis.start says; a topic
        # audited again for a changed predicate from where its audit began.
        starts = {
            k: v
            for k, v in starts.items()
            if k[0] not in recreated and k[0] not in {t for t, _ in rejudged}
        } | rejudged
        ranges = plan_ranges(sampled, audited, starts)
        _reaudit_damaged(spark, config, sources, sampled, topic_ids, progress)
        _report_skipped(ranges, config.analysis.start, progress)
        if ranges:
            topics = {r.topic for r in ranges}
            flagged = transactional_topics(
                state_dir, topics, newest
            ) | has_open_or_recent_transaction(s for s in sampled if s.topic in topics)
            total = sum(r.size for r in ranges)
            with AuditTracker(state_dir, total, progress, progress_every_s) as tracker:
                try:
                    batch, transactional = _fingerprint_kafka(
                        spark, sources, ranges, rules, flagged, state_dir, tracker, topic_ids,
                        config=config,
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
                        batch, transactional = _fingerprint_kafka(
                            spark, sources, ranges, rules, flagged, state_dir, tracker,
                            topic_ids, config=config,
                        )  # fmt: skip
            for topic in sorted(topics):
                mine = [r for r in (batch.ranges if batch else []) if r["topic"] == topic]
                records[topic] = sum(int(r["records"]) for r in mine)
                twice = ", read_committed too" if topic in transactional else ""
                progress(
                    f"audit: topic {topic}: {records[topic]} records in {len(mine)} "
                    f"partitions{twice}"
                )
        external = _snapshot_external(config, records, progress)
        jdbc = audit_jdbc(spark, config, records, progress)
    seconds = time.monotonic() - began
    progress(f"audit: {sum(records.values())} records from {len(records)} topics in {seconds:.1f}s")
    return AuditResult(
        records,
        tuple(ranges),
        batch.path if batch else None,
        seconds,
        transactional,
        external,
        jdbc.path if jdbc else None,
        rereads,
        new_offsets,
    )


def reread_share(
    spark: SparkSession,
    config: DgmConfig,
    bootstrap_servers: str,
    new_offsets: int,
    progress: Progress = _quiet,
) -> RereadReport:
    """Read again `analysis.reread_share` of the `new_offsets` a cycle audited (owed until it
    makes a chunk: audit/reread.py), after that cycle published; a truncation it finds is
    rewritten now and published by the next cycle."""
    store = FingerprintStore(config.state_dir)
    with store.writer_lock():
        sources = kafka_sources(config, bootstrap_servers)
        newest = MAX_SAMPLE_FILES * len(sources.options)
        sampled = latest_offsets(config.state_dir, topic_rules(config), newest)
        share = config.analysis.reread_share
        return _reread(spark, config, sources, sampled, newest, store, progress, share, new_offsets)


def _new_offsets(sampled: Sequence[PartitionOffsets], store: FingerprintStore) -> int:
    """The offsets between what was audited and each partition's sampled LSO."""
    audited = store.audited_positions()
    return sum(
        max(0, s.lso - audited[key]) for s in sampled if (key := (s.topic, s.partition)) in audited
    )


def _reread(
    spark: SparkSession,
    config: DgmConfig,
    sources: KafkaSources,
    sampled: Sequence[PartitionOffsets],
    newest: int,
    store: FingerprintStore,
    progress: Progress,
    share: float,
    new_offsets: int,
) -> RereadReport:
    """Read part of the audited offsets again (around backwards moves, and `share` of
    `new_offsets`) and rewrite the partitions found truncated (audit/truncation.py); call
    under the store's writer lock. `newest`: the sample files to look at for transactions."""
    rules = topic_rules(config)

    def read(ranges: Sequence[OffsetRange]) -> DataFrame:
        return read_ranges(spark, sources, ranges, "read_uncommitted")

    def fingerprint(ranges: Sequence[OffsetRange]) -> tuple[DataFrame, Callable[[], None]]:
        topics = {r.topic for r in ranges}
        flagged = transactional_topics(
            config.state_dir, topics, newest
        ) | has_open_or_recent_transaction(s for s in sampled if s.topic in topics)
        total = sum(r.size for r in ranges)
        with AuditTracker(config.state_dir, total, progress) as tracker:
            found = fingerprinted(
                spark, sources, ranges, rules, flagged, tracker, config.state_dir, config=config
            )
        return found.frame, found.done

    return reread(
        spark, store, SampleStore(config.state_dir), sampled, rules,
        share, new_offsets, read, fingerprint, progress,
    )  # fmt: skip


def _reaudit_damaged(
    spark: SparkSession,
    config: DgmConfig,
    sources: KafkaSources,
    sampled: Sequence[PartitionOffsets],
    topic_ids: Mapping[str, str],
    progress: Progress,
) -> None:
    """Audit again, as one batch of their own, the offsets of batches set aside as damaged
    (FingerprintStore.set_aside_damaged), as far as Kafka still holds them."""
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
        _fingerprint_kafka(
            spark, sources, again, rules, flagged, config.state_dir, tracker, topic_ids,
            reaudits=sorted(damaged), config=config,
        )  # fmt: skip


def _rejudge_changed_predicates(
    spark: SparkSession, config: DgmConfig, store: FingerprintStore, progress: Progress
) -> dict[Key, int]:
    """Forget the fingerprints of the source topics whose pipeline's `expected` predicate is
    not the one they were audited under (they carry the old predicate's evaluation), so they
    are audited again under the new one; (topic, partition) -> where their audit began."""
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


def _snapshot_external(
    config: DgmConfig, records: dict[str, int], progress: Progress
) -> dict[str, Path]:
    store = FingerprintStore(config.state_dir)
    snapshots: dict[str, Path] = {}
    for pipeline in config.pipelines:
        if pipeline.external_sink is None or pipeline.external_sink.kind not in FILE_KINDS:
            continue  # a JDBC sink is read incrementally (jdbc_audit)
        began = time.monotonic()
        table = external_fingerprints(pipeline)
        snapshots[pipeline.name] = store.write_external(pipeline.name, table)
        name = pipeline.sink_names()[-1]
        records[name] = table.num_rows
        progress(
            f"audit: external sink {name}: {table.num_rows} rows in {time.monotonic() - began:.1f}s"
        )
    store.remove_external_except(set(snapshots))
    return snapshots
