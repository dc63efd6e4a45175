"""Build the SparkSession every Spark job uses: local[*] by default, any master by config."""

from __future__ import annotations

import os

import pyspark
from pyspark.sql import SparkSession

from dgm.paths import user_cache_dir

SCALA_BINARY = "2.13"


def kafka_source_package() -> str:
    """The Spark Kafka source matching the installed PySpark, resolved from Maven Central."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{pyspark.__version__}"


def build_session(
    master: str | None = None,
    app_name: str = "dgm",
    shuffle_partitions: int | None = None,
) -> SparkSession:
    master = master or os.environ.get("DGM_SPARK_MASTER", "local[*]")
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars.packages", kafka_source_package())
        # The Ivy cache lives beside dgm's other downloads so a warm start never re-fetches.
        .config("spark.jars.ivy", str(user_cache_dir() / "ivy"))
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or 2 * cores))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
