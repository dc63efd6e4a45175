"""Per-topic and per-partition windows: records, ids, aborted records and duplicate copies
per `analysis.window_s` window, plus each topic's cumulative row."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm import published as tables
from spark_jobs.analyze.duplicates import duplicate_summary
from spark_jobs.analyze.frames import conform, window_start


def topic_windows(fingerprints: DataFrame, extra: DataFrame, window_s: int) -> DataFrame:
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


def partition_windows(fingerprints: DataFrame, extra: DataFrame, window_s: int) -> DataFrame:
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
