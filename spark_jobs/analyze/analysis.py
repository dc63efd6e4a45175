"""Every published table of dgm.published from fingerprints and collector samples.

`analyze` is pure: DataFrames in, one DataFrame per contract table out (columns and types
exactly as dgm.published declares them), nothing computed until the caller publishes. Every table
reads the fingerprints several times: cache them first. The words are docs/design.md's;
the per-pipeline rules live in the loss, duplicates and verdict modules beside this one.

The tables share their expensive parts (duplicate copies and causes, lost ids, the
per-pipeline metrics): publish computes one table at a time, and without persisting those
every table recomputed them (bench/README.md, "Analyze"). They are persisted, so the first
table that needs one computes it and the rest read it, and unpersisted once every table
frame of the run is gone (see `_Shared`).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType, StructField, StructType

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze import loss, verdict
from spark_jobs.analyze.duplicates import (
    UPSTREAM,
    duplicate_causes,
    duplicate_copies,
    duplicate_summary,
)
from spark_jobs.analyze.samples import KINDS, empty_samples

# The contract's SQL types as Spark types.
SPARK_TYPES = {
    "VARCHAR": "string",
    "BIGINT": "bigint",
    "INTEGER": "int",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "TIMESTAMPTZ": "timestamp",
    "VARCHAR[]": "array<string>",
}
# Events that give a verdict weight: for the pipeline's group, for producers on its topics,
# and cluster-wide ones that count for every pipeline.
GROUP_FAULTS = ("rebalance", "member_joined", "member_left")
PRODUCER_FAULTS = ("epoch_bump",)
CLUSTER_FAULTS = ("outage_start", "broker_left")
# The per-pipeline counts, each a column of the long metrics frame.
COUNTS = (
    "records_checked",
    "duplicate_copies",
    "upstream_duplicates",
    "lost",
    "aborted_reads",
    "sink_records",
    "unidentified",
    "faults_observed",
)

_PIPELINES = StructType(
    [
        StructField("pipeline", StringType(), False),
        StructField("declared", StringType(), False),
        StructField("source_topics", ArrayType(StringType()), False),
        StructField("sink", ArrayType(StringType()), False),
        StructField("consumer_group", StringType(), False),
    ]
)


class _Shared:
    """The frames one analyze run persisted. Each table frame it returns holds this object;
    when the last of them is garbage collected (after publish), the frames are unpersisted.
    A frame derived from a table frame does not hold it: keep the table frame alive too, or
    the derived one recomputes (correctly, just slower)."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []
        finalizer = weakref.finalize(self, _unpersist, self.frames)
        finalizer.atexit = False  # the JVM may be gone by then, and so are its caches

    def persist(self, frame: DataFrame) -> DataFrame:
        persisted = frame.persist()  # lazy: the first table that needs it computes it
        self.frames.append(persisted)
        return persisted

    def hold(self, frames: dict[str, DataFrame]) -> dict[str, DataFrame]:
        for frame in frames.values():
            frame._dgm_shared = self  # type: ignore[attr-defined]
        return frames


def _unpersist(frames: list[DataFrame]) -> None:
    for frame in frames:
        with contextlib.suppress(Exception):  # a stopped session has nothing left to free
            frame.unpersist(blocking=False)


def conform(frame: DataFrame, table: tables.Table) -> DataFrame:
    """`frame` with exactly `table`'s columns, in order and of its types (null when absent)."""
    return frame.select(
        *(
            (F.col(c.name) if c.name in frame.columns else F.lit(None))
            .cast(SPARK_TYPES[c.sql_type])
            .alias(c.name)
            for c in table.columns
        )
    )


def window_start(at: Column, window_s: int) -> Column:
    """Start of the epoch-aligned `window_s`-second window holding `at` (integer arithmetic)."""
    micros, width = F.unix_micros(at), F.lit(window_s * 1_000_000)
    return F.timestamp_micros(micros - F.pmod(micros, width))


def _union(frames: list[DataFrame], empty: DataFrame) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames, empty)


def _metric_sums(metrics: DataFrame) -> DataFrame:
    """The long metrics summed per (pipeline, at): one row per record time, not per record."""
    return metrics.groupBy("pipeline", "at").agg(
        *(F.sum(c).cast("long").alias(c) for c in COUNTS if c != "faults_observed")
    )


def _metric(frame: DataFrame, at: str, **counts: Column) -> DataFrame:
    """(pipeline, at, *counts) rows of `frame`, for the long metrics frame."""
    return frame.select(
        "pipeline",
        F.col(at).alias("at"),
        *(F.coalesce(c.cast("long"), F.lit(0)).alias(name) for name, c in counts.items()),
    )


def _pipelines_frame(spark: SparkSession, config: DgmConfig) -> DataFrame:
    rows = [
        (p.name, p.declared_semantic, list(p.source_topics), list(p.sink_names()), p.consumer_group)
        for p in config.pipelines
    ]
    return spark.createDataFrame(rows, _PIPELINES)


def _pipeline_topics(spark: SparkSession, config: DgmConfig) -> DataFrame:
    rows = [(p.name, t) for p in config.pipelines for t in (*p.source_topics, *p.sink_topics)]
    return spark.createDataFrame(rows, "pipeline string, topic string")


def _roles(spark: SparkSession, config: DgmConfig) -> DataFrame:
    """(pipeline, topic, role, external): every source and sink name of every pipeline."""
    rows = []
    for p in config.pipelines:
        external = p.sink_names()[-1] if p.external_sink is not None else None
        rows += [(p.name, t, "source", False) for t in p.source_topics]
        rows += [(p.name, t, "sink", t == external) for t in p.sink_names()]
    return spark.createDataFrame(
        rows, "pipeline string, topic string, role string, external boolean"
    )


def _tagged(fingerprints: DataFrame, roles: DataFrame, role: str) -> DataFrame:
    """FINGERPRINT rows of the pipelines' `role` topics, with `pipeline` and `external`."""
    chosen = roles.where(F.col("role") == F.lit(role)).drop("role")
    return fingerprints.join(F.broadcast(chosen), ["topic"])


def faults(
    spark: SparkSession, config: DgmConfig, events: DataFrame, producers: DataFrame
) -> DataFrame:
    """The events sample, one row per pipeline each event is attributed to: group events to
    the pipelines of the group, epoch bumps to the pipelines with the producer on one of their
    topics (producers sample); null for the rest (cluster-wide or unmonitored)."""
    by_group = _pipelines_frame(spark, config).select(
        F.col("consumer_group").alias("_group"), F.col("pipeline").alias("_by_group")
    )
    by_producer = (
        producers.select(F.col("producer_id").alias("_pid"), "topic")
        .distinct()
        .join(F.broadcast(_pipeline_topics(spark, config)), ["topic"])
        .select("_pid", F.col("pipeline").alias("_by_producer"))
        .distinct()
    )
    attributed = events.join(
        F.broadcast(by_group), events["group_id"] == F.col("_group"), "left"
    ).join(
        by_producer,
        (events["event"].isin(*PRODUCER_FAULTS)) & (events["producer_id"] == F.col("_pid")),
        "left",
    )
    pipeline = F.coalesce("_by_group", "_by_producer")
    return conform(
        attributed.select(
            F.col("sampled_at").alias("at"),
            "event",
            "group_id",
            pipeline.alias("pipeline"),
            "detail",
        ),
        tables.FAULTS,
    )


def _counted_faults(spark: SparkSession, config: DgmConfig, fault_rows: DataFrame) -> DataFrame:
    """(pipeline, at) of the faults that count for each pipeline's evidence, one row per
    event (events of one collector cycle share their time and still count apart)."""
    own = fault_rows.where(
        F.col("pipeline").isNotNull() & F.col("event").isin(*GROUP_FAULTS, *PRODUCER_FAULTS)
    ).select("pipeline", "at")
    names = _pipelines_frame(spark, config).select("pipeline")
    cluster = (
        fault_rows.where(F.col("event").isin(*CLUSTER_FAULTS))
        .select("at")
        .crossJoin(F.broadcast(names))
    )
    return own.unionByName(cluster.select("pipeline", "at"))


def _keyed_causes(source: DataFrame, sink: DataFrame, key: str) -> DataFrame:
    """duplicate_causes of each value of column `key` (both frames have it) in one call: ids
    are prefixed with the key (keys hold no NUL), so keys never see each other's ids."""
    separator = "\u0000"

    def prefixed(frame: DataFrame) -> DataFrame:
        joined = F.concat_ws(separator, F.col(key), F.col("message_id"))
        return frame.withColumn("message_id", F.when(F.col("message_id").isNotNull(), joined))

    causes = duplicate_causes(prefixed(source).drop(key), prefixed(sink).drop(key))
    start = F.instr(F.col("message_id"), separator) + 1
    return causes.select(
        F.substring_index("message_id", separator, 1).alias(key),
        "topic",
        F.col("message_id").substr(start, F.lit(1 << 30)).alias("message_id"),
        "cause",
    )


def _plain_causes(fingerprints: DataFrame, plain: DataFrame) -> DataFrame:
    """Causes of duplicates in topics that are no pipeline's sink: each topic is the sink of
    the topics its records name in dgm-src (none: only sink-side causes can apply)."""
    upstream_of = (
        plain.where(F.col("src_topic").isNotNull())
        .select(F.col("topic").alias("_sink"), F.col("src_topic").alias("topic"))
        .distinct()
    )
    source = fingerprints.join(F.broadcast(upstream_of), ["topic"])
    causes = _keyed_causes(source, plain.withColumn("_sink", F.col("topic")), "_sink")
    return causes.select(
        F.lit(None).cast("string").alias("pipeline"), "topic", "message_id", "cause"
    )


def _topic_windows(fingerprints: DataFrame, extra: DataFrame, window_s: int) -> DataFrame:
    committed, identified = F.col("committed"), F.col("message_id").isNotNull()
    timed = fingerprints.where(F.col("timestamp").isNotNull())
    windowed = timed.groupBy(
        "topic", window_start(F.col("timestamp"), window_s).alias("window_start")
    ).agg(
        F.count_if(committed).alias("records"),
        F.count_distinct(F.when(committed, F.col("message_id"))).alias("distinct_ids"),
        F.count_if(committed & ~identified).alias("unidentified"),
        F.count_if(~committed).alias("aborted"),
    )
    extra_per_window = extra.groupBy(
        "topic", window_start(F.col("timestamp"), window_s).alias("window_start")
    ).agg(F.count(F.lit(1)).alias("duplicate_copies"))
    per_window = windowed.join(extra_per_window, ["topic", "window_start"], "left").withColumn(
        "duplicate_copies", F.coalesce("duplicate_copies", F.lit(0))
    )
    per_window = per_window.withColumn(
        "duplicate_rate", F.try_divide(F.col("duplicate_copies"), F.col("distinct_ids"))
    )
    cumulative = duplicate_summary(fingerprints).withColumn(
        "window_start", F.lit(None).cast("timestamp")
    )
    return conform(per_window, tables.TOPIC_WINDOWS).unionByName(
        conform(cumulative, tables.TOPIC_WINDOWS)
    )


def _partition_windows(fingerprints: DataFrame, extra: DataFrame, window_s: int) -> DataFrame:
    keys = ["topic", "partition", "window_start"]
    start = window_start(F.col("timestamp"), window_s).alias("window_start")
    counts = (
        fingerprints.where(F.col("timestamp").isNotNull())
        .groupBy("topic", "partition", start)
        .agg(
            F.count_if(F.col("committed")).alias("records"),
            F.count_if(~F.col("committed")).alias("aborted"),
        )
    )
    extra_counts = extra.groupBy("topic", "partition", start).agg(
        F.count(F.lit(1)).alias("duplicate_copies")
    )
    joined = counts.join(extra_counts, keys, "left").withColumn(
        "duplicate_copies", F.coalesce("duplicate_copies", F.lit(0))
    )
    return conform(joined, tables.PARTITION_WINDOWS)


def _rate(numerator: str, denominator: str) -> Column:
    return F.try_divide(F.col(numerator), F.col(denominator)).cast("double")


def _pipeline_tables(
    spark: SparkSession,
    config: DgmConfig,
    metrics: DataFrame,
    sink_ids: DataFrame,
    counted_faults: DataFrame,
) -> tuple[DataFrame, DataFrame]:
    """verdicts and pipeline_windows from the long per-pipeline metrics."""
    settings = config.analysis
    grace = F.make_dt_interval(secs=F.lit(float(settings.grace_s)))
    spans = (
        metrics.where(F.col("records_checked") > 0)
        .groupBy("pipeline")
        .agg(F.min("at").alias("first_record_at"), F.max("at").alias("last_record_at"))
    )
    in_span = counted_faults.join(F.broadcast(spans), ["pipeline"]).where(
        (F.col("at") >= F.col("first_record_at")) & (F.col("at") <= F.col("last_record_at") + grace)
    )
    all_metrics = metrics.unionByName(
        in_span.select("pipeline", "at", F.lit(1).cast("long").alias("faults_observed")),
        allowMissingColumns=True,
    ).fillna(0, list(COUNTS))
    sums = [F.sum(c).cast("long").alias(c) for c in COUNTS]
    pipelines = _pipelines_frame(spark, config)

    distinct = (
        (sink_ids.groupBy("pipeline", "topic").agg(F.count_distinct("message_id").alias("_d")))
        .groupBy("pipeline")
        .agg(F.sum("_d").cast("long").alias("distinct_ids"))
    )
    totals = all_metrics.groupBy("pipeline").agg(*sums)
    verdicts = (
        pipelines.join(totals, ["pipeline"], "left")
        .join(distinct, ["pipeline"], "left")
        .join(spans, ["pipeline"], "left")
        .fillna(0, [*COUNTS, "distinct_ids"])
    )
    verdicts = _judged(verdicts, settings.min_records).withColumn(
        "evidence", verdict.evidence_column(F.col("records_checked"), F.col("faults_observed"))
    )

    start = window_start(F.col("at"), settings.window_s).alias("window_start")
    window_distinct = (
        sink_ids.groupBy(
            "pipeline",
            "topic",
            window_start(F.col("timestamp"), settings.window_s).alias("window_start"),
        )
        .agg(F.count_distinct("message_id").alias("_d"))
        .groupBy("pipeline", "window_start")
        .agg(F.sum("_d").cast("long").alias("distinct_ids"))
    )
    per_window = (
        all_metrics.where(F.col("at").isNotNull())
        .groupBy("pipeline", start)
        .agg(*sums)
        .join(window_distinct, ["pipeline", "window_start"], "left")
        .join(pipelines.select("pipeline", "declared"), ["pipeline"])
    )
    windows = _judged(per_window, settings.min_records)
    return conform(verdicts, tables.VERDICTS), conform(windows, tables.PIPELINE_WINDOWS)


def _judged(counts: DataFrame, min_records: int) -> DataFrame:
    achieved = verdict.achieved_column(
        F.col("records_checked"),
        F.col("duplicate_copies"),
        F.col("lost"),
        F.col("aborted_reads"),
        min_records,
    )
    return (
        counts.withColumn("duplicate_rate", _rate("duplicate_copies", "distinct_ids"))
        .withColumn("loss_rate", _rate("lost", "records_checked"))
        .withColumn("achieved", achieved)
        .withColumn(
            "meets_declared", verdict.meets_declared_column(F.col("achieved"), F.col("declared"))
        )
    )


def _latest(frame: DataFrame) -> DataFrame:
    """The rows of `frame` (a sample kind) taken at its newest sampled_at."""
    newest = frame.agg(F.max("sampled_at").alias("_newest"))
    return frame.join(F.broadcast(newest), F.col("sampled_at") == F.col("_newest")).drop("_newest")


def sample_tables(samples: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
    """partition_offsets, group_lag and transactions (open ones at the last producers sample)."""
    producers = _latest(samples["producers"]).where(F.col("txn_start_offset").isNotNull())
    return {
        tables.PARTITION_OFFSETS.name: conform(samples["offsets"], tables.PARTITION_OFFSETS),
        tables.GROUP_LAG.name: conform(samples["group_offsets"], tables.GROUP_LAG),
        tables.TRANSACTIONS.name: conform(
            producers.withColumn("age_ms", F.col("idle_ms")), tables.TRANSACTIONS
        ),
    }


def runs(
    spark: SparkSession,
    config: DgmConfig,
    fingerprints: DataFrame,
    samples: Mapping[str, DataFrame],
) -> DataFrame:
    """The runs row without what only the caller knows (run_id, started_at, finished_at,
    records_audited): fill those with `fill_run`."""
    newest = _union(
        [samples[kind].select("sampled_at") for kind in KINDS if kind in samples],
        spark.createDataFrame([], "sampled_at timestamp"),
    ).agg(F.max("sampled_at").alias("last_sample_at"))
    counted = fingerprints.agg(F.count(F.lit(1)).alias("fingerprints"))
    row = counted.crossJoin(newest).select(
        "*",
        F.lit(config.analysis.window_s).alias("window_s"),
        F.lit(spark.sparkContext.master).alias("spark_master"),
    )
    return conform(row, tables.RUNS)


def fill_run(
    run: DataFrame,
    run_id: str,
    started_at: datetime,
    finished_at: datetime,
    records_audited: int | None = None,
) -> DataFrame:
    """`run` (from `runs`) with the fields only the caller knows."""
    filled = run.withColumns(
        {
            "run_id": F.lit(run_id),
            "started_at": F.lit(started_at),
            "finished_at": F.lit(finished_at),
            "records_audited": F.lit(records_audited).cast("long"),
        }
    )
    return conform(filled, tables.RUNS)


def analyze(
    spark: SparkSession,
    config: DgmConfig,
    fingerprints: DataFrame,
    samples: Mapping[str, DataFrame],
    now: datetime,
) -> dict[str, DataFrame]:
    """Every table of dgm.published (name -> DataFrame of its columns) from FINGERPRINT
    rows of all topics (an external sink's under its sink_names() name) and the sample kinds
    (a missing kind counts as empty). `now` is aware UTC; losses need `now - grace_s`."""
    settings = config.analysis
    samples = {k: samples[k] if k in samples else empty_samples(spark, k) for k in KINDS}
    cutoff = now - timedelta(seconds=settings.grace_s)
    window_s = settings.window_s

    roles = _roles(spark, config)
    source, sink = _tagged(fingerprints, roles, "source"), _tagged(fingerprints, roles, "sink")
    groups = _pipelines_frame(spark, config).select("pipeline", "consumer_group")
    shared = _Shared()
    claimed = shared.persist(
        loss.claimed_offsets(
            loss.latest_committed(samples["group_offsets"], groups), sink.where("external")
        )
    )
    checked = loss.checked_records(source, claimed, cutoff)
    lost = shared.persist(loss.not_in_sink(checked, sink).unionByName(loss.gaps(source, cutoff)))
    committed_sink = sink.where("committed")

    sink_names = {t for p in config.pipelines for t in p.sink_names()}
    plain = fingerprints.where(~F.col("topic").isin(*sink_names)) if sink_names else fingerprints
    causes = _keyed_causes(source, sink, "pipeline").unionByName(_plain_causes(fingerprints, plain))
    copies = shared.persist(duplicate_copies(fingerprints))
    duplicates = shared.persist(copies.join(causes, ["topic", "message_id"]))
    extra = copies.where("is_extra_copy")
    upstream = F.col("cause") == F.lit(UPSTREAM)
    metrics = [
        _metric(checked, "timestamp", records_checked=F.lit(1)),
        _metric(lost, "window_at", lost=F.col("missing")),
        _metric(loss.aborted_reads(source, sink), "timestamp", aborted_reads=F.lit(1)),
        _metric(
            committed_sink,
            "timestamp",
            sink_records=F.lit(1),
            unidentified=F.col("message_id").isNull(),
        ),
        _metric(
            source.where(F.col("committed") & F.col("message_id").isNull()),
            "timestamp",
            unidentified=F.lit(1),
        ),
        _metric(
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
    verdicts, pipeline_windows = _pipeline_tables(
        spark,
        config,
        shared.persist(_metric_sums(_union(metrics, no_metrics))),
        sink_ids,
        _counted_faults(spark, config, fault_rows),
    )
    return shared.hold(
        {
            tables.RUNS.name: runs(spark, config, fingerprints, samples),
            tables.VERDICTS.name: verdicts,
            tables.PIPELINE_WINDOWS.name: pipeline_windows,
            tables.TOPIC_WINDOWS.name: _topic_windows(fingerprints, extra, window_s),
            tables.PARTITION_WINDOWS.name: _partition_windows(fingerprints, extra, window_s),
            tables.DUPLICATES.name: conform(duplicates, tables.DUPLICATES),
            tables.LOST.name: conform(lost, tables.LOST),
            **sample_tables(samples),
            tables.FAULTS.name: fault_rows,
        }
    )
