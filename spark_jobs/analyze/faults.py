"""Faults: the collectors' events attributed to pipelines, and those that weigh as evidence
(docs/design.md, "verdict")."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze.frames import conform
from spark_jobs.analyze.pipelines import pipeline_topics, pipelines_frame

# Events that give a verdict weight: for the pipeline's group, for producers on its topics,
# and cluster-wide ones that count for every pipeline.
GROUP_FAULTS = ("rebalance", "member_joined", "member_left")
PRODUCER_FAULTS = ("epoch_bump",)
TOPIC_FAULTS = ("topic_recreated",)
CLUSTER_FAULTS = ("outage_start", "broker_left")


def faults(
    spark: SparkSession, config: DgmConfig, events: DataFrame, producers: DataFrame
) -> DataFrame:
    """The events sample, one row per pipeline each event is attributed to: group events to
    the pipelines of the group, epoch bumps to the pipelines with the producer on one of their
    topics (producers sample), a recreated topic to the pipelines of the topic; null for the
    rest (cluster-wide or unmonitored)."""
    by_group = pipelines_frame(spark, config).select(
        F.col("consumer_group").alias("_group"), F.col("pipeline").alias("_by_group")
    )
    by_producer = (
        producers.select(F.col("producer_id").alias("_pid"), "topic")
        .distinct()
        .join(F.broadcast(pipeline_topics(spark, config)), ["topic"])
        .select("_pid", F.col("pipeline").alias("_by_producer"))
        .distinct()
    )
    by_topic = pipeline_topics(spark, config).select(
        F.col("topic").alias("_topic"), F.col("pipeline").alias("_by_topic")
    )
    attributed = (
        events.join(F.broadcast(by_group), events["group_id"] == F.col("_group"), "left")
        .join(
            by_producer,
            (events["event"].isin(*PRODUCER_FAULTS)) & (events["producer_id"] == F.col("_pid")),
            "left",
        )
        .join(
            F.broadcast(by_topic),
            events["event"].isin(*TOPIC_FAULTS) & (events["topic"] == F.col("_topic")),
            "left",
        )
    )
    pipeline = F.coalesce("_by_group", "_by_producer", "_by_topic")
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
