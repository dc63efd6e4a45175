"""Every published table of dgm.published from fingerprints and collector samples.

`analyze` is pure: DataFrames in, one DataFrame per contract table out (columns and types
exactly as dgm.published declares them), nothing computed until the caller publishes. Every table
reads the fingerprints several times: cache them first. The words are docs/design.md's;
the per-pipeline rules live in the loss, duplicates and verdict modules beside this one.

The tables share their expensive parts (duplicate copies and causes, lost ids, the
per-pipeline metrics): publish computes one table at a time, and without persisting those
every table recomputed them (bench/README.md, "Analyze"). They are persisted, so the first
table that needs one computes it and the rest read it, and unpersisted once every table
frame of the run is gone (see frames.Shared).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze import loss
from spark_jobs.analyze.duplicates import UPSTREAM, duplicate_copies, keyed_causes, plain_causes
from spark_jobs.analyze.faults import counted_faults, faults
from spark_jobs.analyze.frames import Shared, conform, union_all
from spark_jobs.analyze.group_status import group_status
from spark_jobs.analyze.pipeline_metrics import COUNTS, metric, metric_sums, pipeline_tables
from spark_jobs.analyze.pipelines import pipelines_frame, roles, tagged
from spark_jobs.analyze.runs import runs
from spark_jobs.analyze.samples import KINDS, empty_samples, sample_tables
from spark_jobs.analyze.windows import partition_windows, topic_windows


def analyze(
    spark: SparkSession,
    config: DgmConfig,
    fingerprints: DataFrame,
    samples: Mapping[str, DataFrame],
    now: datetime,
) -> dict[str, DataFrame]:
    """Every table of dgm.published (name -> DataFrame of its columns) from FINGERPRINT
    rows of all topics (an external sink's under its sink_names() name) and the sample kinds
    (a missing kind counts as empty). `now` is aware UTC, the time the fingerprints are
    complete up to (the audit's horizon): losses need `now - grace_s` and group commits
    sampled by `now`."""
    settings = config.analysis
    samples = {k: samples[k] if k in samples else empty_samples(spark, k) for k in KINDS}
    cutoff = now - timedelta(seconds=settings.grace_s)
    window_s = settings.window_s

    topic_roles = roles(spark, config)
    source = tagged(fingerprints, topic_roles, "source")
    sink = tagged(fingerprints, topic_roles, "sink")
    groups = pipelines_frame(spark, config).select("pipeline", "consumer_group")
    shared = Shared()
    claimed = shared.persist(
        loss.claimed_offsets(
            loss.latest_committed(samples["group_offsets"], groups, now), sink.where("external")
        )
    )
    checked = loss.checked_records(source, claimed, cutoff)
    missing = shared.persist(loss.missing(checked, sink))
    lost = shared.persist(loss.not_in_sink(missing).unionByName(loss.gaps(source, cutoff)))
    committed_sink = sink.where("committed")

    sink_names = {t for p in config.pipelines for t in p.sink_names()}
    plain = fingerprints.where(~F.col("topic").isin(*sink_names)) if sink_names else fingerprints
    causes = keyed_causes(source, sink, "pipeline").unionByName(plain_causes(fingerprints, plain))
    copies = shared.persist(duplicate_copies(fingerprints))
    duplicates = shared.persist(copies.join(causes, ["topic", "message_id"]))
    extra = copies.where("is_extra_copy")
    upstream = F.col("cause") == F.lit(UPSTREAM)
    metrics = [
        metric(checked, "timestamp", records_checked=F.lit(1)),
        # Beyond retention: not judged, so not checked either (docs/design.md).
        metric(
            missing.where("beyond_retention"),
            "timestamp",
            records_checked=F.lit(-1),
            beyond_retention=F.lit(1),
        ),
        metric(lost, "window_at", lost=F.col("missing")),
        metric(loss.aborted_reads(source, sink), "timestamp", aborted_reads=F.lit(1)),
        metric(
            committed_sink,
            "timestamp",
            sink_records=F.lit(1),
            unidentified=F.col("message_id").isNull(),
        ),
        metric(
            source.where(F.col("committed") & F.col("message_id").isNull()),
            "timestamp",
            unidentified=F.lit(1),
        ),
        metric(
            duplicates.where(F.col("pipeline").isNotNull() & F.col("is_extra_copy")),
            "timestamp",
            duplicate_copies=~upstream,
            upstream_duplicates=upstream,
        ),
    ]
    no_metrics = spark.createDataFrame(
        [], "pipeline string, at timestamp, " + ", ".join(f"{c} bigint" for c in COUNTS)
    )
    sink_ids = committed_sink.where(F.col("message_id").isNotNull()).select(
        "pipeline", "topic", "timestamp", "message_id"
    )
    fault_rows = faults(spark, config, samples["events"], samples["producers"])
    verdicts, pipeline_windows = pipeline_tables(
        spark,
        config,
        shared.persist(metric_sums(union_all(metrics, no_metrics))),
        sink_ids,
        counted_faults(spark, config, fault_rows),
    )
    return shared.hold(
        {
            tables.RUNS.name: runs(spark, config, fingerprints, samples),
            tables.VERDICTS.name: verdicts,
            tables.PIPELINE_WINDOWS.name: pipeline_windows,
            tables.TOPIC_WINDOWS.name: topic_windows(fingerprints, extra, window_s),
            tables.PARTITION_WINDOWS.name: partition_windows(fingerprints, extra, window_s),
            tables.DUPLICATES.name: conform(duplicates, tables.DUPLICATES),
            tables.LOST.name: conform(lost, tables.LOST),
            **sample_tables(samples),
            tables.GROUP_STATUS.name: group_status(
                samples["group_offsets"], settings.group_status_window
            ),
            tables.FAULTS.name: fault_rows,
        }
    )
