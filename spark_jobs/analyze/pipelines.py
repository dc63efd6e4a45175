"""The configured pipelines as small broadcastable frames: names and topics."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, StringType, StructField, StructType

from dgm.config_schema import DgmConfig

PIPELINES = StructType(
    [
        StructField("pipeline", StringType(), False),
        StructField("declared", StringType(), False),
        StructField("source_topics", ArrayType(StringType()), False),
        StructField("sink", ArrayType(StringType()), False),
        StructField("consumer_group", StringType(), False),
    ]
)


def pipelines_frame(spark: SparkSession, config: DgmConfig) -> DataFrame:
    rows = [
        (p.name, p.declared_semantic, list(p.source_topics), list(p.sink_names()), p.consumer_group)
        for p in config.pipelines
    ]
    return spark.createDataFrame(rows, PIPELINES)


def pipeline_topics(spark: SparkSession, config: DgmConfig) -> DataFrame:
    rows = [(p.name, t) for p in config.pipelines for t in (*p.source_topics, *p.sink_topics)]
    return spark.createDataFrame(rows, "pipeline string, topic string")
