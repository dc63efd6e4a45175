"""One bounded read through Spark's Kafka source, to try its Java client (`dgm check`)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from spark_jobs.audit.kafka_source import read_range
from spark_jobs.audit.ranges import OffsetRange


def read_probe(
    spark: SparkSession,
    options: Mapping[str, str],
    topic: str,
    partition: int,
    start: int,
    end: int,
) -> int:
    """How many records Spark's Kafka source reads from offsets [start, end) of one partition,
    with the audit's options: the Java client connects and authenticates as the audit's does,
    and needs Read on the topic when the range holds records."""
    ranges = [OffsetRange(topic, partition, start, end)]
    return read_range(spark, options, ranges, "read_uncommitted").count()
