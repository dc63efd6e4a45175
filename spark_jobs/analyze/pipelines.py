"""The configured pipelines as small broadcastable frames: names, topics and roles."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
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


def roles(spark: SparkSession, config: DgmConfig) -> DataFrame:
    """(pipeline, topic, role, external): every source and sink name of every pipeline."""
    rows = []
    for p in config.pipelines:
        external = p.sink_names()[-1] if p.external_sink is not None else None
        rows += [(p.name, t, "source", False) for t in p.source_topics]
        rows += [(p.name, t, "sink", t == external) for t in p.sink_names()]
    return spark.createDataFrame(
        rows, "pipeline string, topic string, role string, external boolean"
    )


def tagged(fingerprints: DataFrame, roles: DataFrame, role: str) -> DataFrame:
    """FINGERPRINT rows of the pipelines' `role` topics, with `pipeline` and `external`."""
    chosen = roles.where(F.col("role") == F.lit(role)).drop("role")
    return fingerprints.join(F.broadcast(chosen), ["topic"])
