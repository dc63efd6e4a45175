"""Offset ranges read with the Spark Kafka source in batch mode: one relation per cluster,
the topics named as dgm names them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.contracts.clusters import DEFAULT_CLUSTER, qualified
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.ranges import OffsetRange, assign_json, offsets_json


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
    return union(frames)


def union(frames: Iterable[DataFrame]) -> DataFrame:
    return reduce(DataFrame.unionByName, frames)
