"""The runs table: one row per analysis run."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze.frames import conform, union_all
from spark_jobs.analyze.samples import KINDS


def runs(
    spark: SparkSession,
    config: DgmConfig,
    fingerprints: DataFrame,
    samples: Mapping[str, DataFrame],
) -> DataFrame:
    """The runs row without what only the caller knows (run_id, started_at, finished_at,
    records_audited): fill those with `fill_run`."""
    newest = union_all(
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
