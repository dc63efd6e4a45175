"""Per-pipeline counts into verdicts and pipeline windows (the rules are verdict.py's)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze import verdict
from spark_jobs.analyze.frames import conform, window_start
from spark_jobs.analyze.pipelines import pipelines_frame

# The per-pipeline counts, each a column of the long metrics frame.
COUNTS = (
    "records_checked",
    "duplicate_copies",
    "upstream_duplicates",
    "lost",
    "aborted_reads",
    "sink_records",
    "unidentified",
    "beyond_retention",
    "faults_observed",
)


def metric_sums(metrics: DataFrame) -> DataFrame:
    """The long metrics summed per (pipeline, at): one row per record time, not per record."""
    return metrics.groupBy("pipeline", "at").agg(
        *(F.sum(c).cast("long").alias(c) for c in COUNTS if c != "faults_observed")
    )


def metric(frame: DataFrame, at: str, **counts: Column) -> DataFrame:
    """(pipeline, at, *counts) rows of `frame`, for the long metrics frame."""
    return frame.select(
        "pipeline",
        F.col(at).alias("at"),
        *(F.coalesce(c.cast("long"), F.lit(0)).alias(name) for name, c in counts.items()),
    )


def _rate(numerator: str, denominator: str) -> Column:
    return F.try_divide(F.col(numerator), F.col(denominator)).cast("double")


def pipeline_tables(
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
    pipelines = pipelines_frame(spark, config)

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
