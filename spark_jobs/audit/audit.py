"""`audit`: fingerprint each monitored topic's new offset range, exactly once per range.

The ranges come from the newest `offsets` sample and the audited positions the stored
batches' manifests hold (plan.py, store.py). The ranges are read with the Spark Kafka source
in batch mode, read_uncommitted, headers included, one relation per message id rule (all the
topics that share a rule in one read), and fingerprinted with that rule (chunked_read.py).
The topics that have seen transactions are also read read_committed, in one relation over the
same ranges, and their fingerprints marked committed or aborted (only the coordinates of the
aborted records are joined: aborted_marking.py).
Each chunk of the ranges is read, fingerprinted and written to Parquet in one Spark job, and
counted from its files on the driver; a batch that needs no marking and drops no ids adopts
those files (scratch.py), so a topic without transactions is read and written once. The same
job sets each record's arrival (when the LSO passed it) from the offsets samples
(arrivals.py), whose files the audit reads once (offsets_samples.py).
"Has seen transactions" is decided from the data: a partition whose read_uncommitted read
returned fewer records than its range has offsets (control markers take offsets); an LSO
sampled below the high watermark; or a transactional producer in the `producers` sample.
Everything goes into one batch: the whole audit commits or none of it does.
External sink files (SQLite, DuckDB) are read whole each run and stored as a snapshot per
pipeline; PostgreSQL/JDBC sinks are read incrementally into a batch of their own
(jdbc_audit).

`audit` is the list of its steps, each in the module named for it; the Kafka reads are in
kafka_source.py and aborted_batches.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession

from dgm.config.document import DgmConfig
from dgm.contracts.samples import Key
from spark_jobs.audit.changed_rules import drop_changed_rules
from spark_jobs.audit.cluster_sources import KafkaSources, kafka_sources
from spark_jobs.audit.damaged import reaudit_damaged
from spark_jobs.audit.expected import check_predicates
from spark_jobs.audit.file_sinks import snapshot_file_sinks
from spark_jobs.audit.id_rules import topic_rules
from spark_jobs.audit.jdbc_audit import audit_jdbc
from spark_jobs.audit.new_ranges import audit_new_ranges
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.plan import planned_ranges
from spark_jobs.audit.ranges import MAX_SAMPLE_FILES, OffsetRange
from spark_jobs.audit.recreated import drop_recreated
from spark_jobs.audit.rejudge import rejudge_changed_predicates
from spark_jobs.audit.reread_kafka import new_offsets, reread_audited
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.audit.tracker import EVERY_S
from spark_jobs.audit.truncation import RereadReport

Progress = Callable[[str], None]


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
    # When each partition's audited offsets were sampled, the time its records are held up to
    # (None: missing from the newest samples, not read this cycle): OffsetsSamples.last_sampled.
    last_sampled: dict[Key, datetime | None] = field(default_factory=dict)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.ranges)


def _quiet(_: str) -> None:
    pass


def _newest_files(sources: KafkaSources) -> int:
    # Each cluster's collector writes its own sample files: look as far back per cluster.
    return MAX_SAMPLE_FILES * len(sources.options)


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
    store = FingerprintStore(state_dir)
    with store.writer_lock():
        sources = kafka_sources(config, bootstrap_servers)
        newest = _newest_files(sources)
        # Read once: the newest files plan the ranges, older ones give their arrivals.
        samples = OffsetsSamples(state_dir, rules, newest)
        sampled, topic_ids = samples.latest(), samples.topic_ids()
        recreated = drop_recreated(spark, store, topic_ids, progress)
        # Topics whose id rule changed are audited again from their start, as recreated ones.
        restarted = {*recreated, *drop_changed_rules(spark, store, rules, progress)}
        rejudged = rejudge_changed_predicates(spark, config, store, progress)
        offsets = new_offsets(sampled, store)
        # Only around backwards moves here: they must be re-read before the audit goes on
        # from a truncated partition. The share waits until the cycle has published
        # (reread_share), off the path from a record to the dashboard.
        rereads = reread_audited(
            spark, config, sources, sampled, newest, store, progress, 0.0, 0, samples
        )
        audited = store.audited_positions()
        last_sampled = samples.last_sampled(
            {k for k in audited if k[0] in rules} | {(s.topic, s.partition) for s in sampled}
        )
        planned = planned_ranges(config, sources, sampled, audited, restarted, rejudged, now)
        reaudit_damaged(spark, config, sources, sampled, topic_ids, progress, samples)
        done = audit_new_ranges(
            spark, config, sources, planned, rules, sampled, newest, topic_ids, records,
            progress, progress_every_s, samples,
        )  # fmt: skip
        external = snapshot_file_sinks(config, records, progress)
        jdbc = audit_jdbc(spark, config, records, progress)
    seconds = time.monotonic() - began
    progress(f"audit: {sum(records.values())} records from {len(records)} topics in {seconds:.1f}s")
    return AuditResult(
        records,
        done.ranges,
        done.batch.path if done.batch else None,
        seconds,
        done.transactional,
        external,
        jdbc.path if jdbc else None,
        rereads,
        offsets,
        last_sampled,
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
        newest = _newest_files(sources)
        samples = OffsetsSamples(config.state_dir, topic_rules(config), newest)
        share = config.analysis.reread_share
        return reread_audited(
            spark, config, sources, samples.latest(), newest, store, progress, share,
            new_offsets, samples,
        )  # fmt: skip
