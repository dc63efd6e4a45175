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
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from dgm.config.document import DgmConfig
from dgm.config.external_sinks import FILE_KINDS
from dgm.config.pipelines import MessageIdRule, id_rule_conflicts
from dgm.contracts.clusters import SEPARATOR
from dgm.contracts.samples import Key, PartitionOffsets, SampleStore
from dgm.util.errors import UserFacingError
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
)
from spark_jobs.audit.external import external_fingerprints
from spark_jobs.audit.fingerprint_store import (
    Batch,
    FingerprintStore,
    recorded_topic_ids,
)
from spark_jobs.audit.fingerprinted import CHUNK_OFFSETS, fingerprinted
from spark_jobs.audit.jdbc_audit import audit_jdbc
from spark_jobs.audit.kafka_source import read_ranges
from spark_jobs.audit.ranges import (
    MAX_SAMPLE_FILES,
    OffsetRange,
    has_open_or_recent_transaction,
    latest_offsets,
    latest_topic_ids,
    plan_ranges,
    transactional_topics,
)
from spark_jobs.audit.recreated import forget_topics, recreated_topics
from spark_jobs.audit.start import first_starts
from spark_jobs.audit.tracker import EVERY_S, AuditTracker
from spark_jobs.audit.truncation import RereadReport, reread

Progress = Callable[[str], None]


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
                twice = ", aborted records marked" if topic in transactional else ""
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
