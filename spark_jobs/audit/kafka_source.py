"""Offset ranges read with the Spark Kafka source in batch mode: one relation per cluster,
the topics named as dgm names them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.contracts.clusters import DEFAULT_CLUSTER, qualified
from spark_jobs.audit.cluster_sources import KafkaSources
from spark_jobs.audit.ranges import OffsetRange, assign_json, offsets_json


def audit_group(options: Mapping[str, str], isolation: str) -> str:
    """The group id of the audit's consumers, stable from read to read.

    Spark's executors keep their Kafka consumers in a pool keyed by (group id, partition)
    only. By default every read gets a new group id, so no consumer is ever reused: each
    cycle opened one new consumer (a connection, metadata, a first fetch) per partition,
    which at 600 partitions was most of a cycle (bench/HISTORY.md, "The soak"). A stable
    id lets a partition's consumer serve the next cycle's read. It must differ wherever the
    pool must not hand one read's consumer to another: per cluster (the bootstrap servers
    and the settings' names; no secret goes into it) and per isolation level. The consumers
    only assign partitions and commit nothing: the group is never joined.
    """
    named = "|".join([options.get("kafka.bootstrap.servers", ""), isolation, *sorted(options)])
    return f"dgm-audit-{hashlib.sha256(named.encode()).hexdigest()[:16]}"


def read_range(
    spark: SparkSession,
    options: Mapping[str, str],
    ranges: Sequence[OffsetRange],
    isolation: str,
    include_headers: bool = True,
    stable_group: bool = True,
) -> DataFrame:
    """The records of `ranges` as the Spark Kafka source gives them, headers included
    (`stable_group`: audit_group's id; False, Spark's default of a new group per read, is
    what bench/audit_partitions.py compares it with).

    failOnDataLoss stays true for both isolation levels. Spark's source itself skips offsets
    a read_committed consumer cannot see (markers, aborted records): tested on Kafka 4.1.1,
    including a range that ends in an abort marker. So offsets that retention deletes between
    sampling and reading fail the audit (the next sample's log start moves past them) rather
    than vanish, or, in the read_committed view, pass for aborted records.
    """
    group = {"kafka.group.id": audit_group(options, isolation)} if stable_group else {}
    return (
        spark.read.format("kafka")
        .options(**options, **group)
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
