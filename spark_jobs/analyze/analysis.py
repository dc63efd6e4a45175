"""Every published table of dgm.published from fingerprints and collector samples.

`analyze` takes DataFrames and gives one DataFrame per contract table (columns and types
exactly as dgm.published declares them). The fingerprint-wide work runs here, in a handful
of queries (engine.py: one shuffle by message id, one by producer session, their output kept
in the executors); the per-table frames over that output and over the samples are computed
when the caller publishes. The words are docs/design.md's; the rules live in the duplicates,
loss and verdict modules beside this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze import loss
from spark_jobs.analyze.engine import fingerprint_tables
from spark_jobs.analyze.faults import faults
from spark_jobs.analyze.frames import Shared, conform
from spark_jobs.analyze.group_status import group_status
from spark_jobs.analyze.pipeline_metrics import counted_faults, pipeline_tables
from spark_jobs.analyze.pipelines import pipelines_frame
from spark_jobs.analyze.publish import Published, arrow_of
from spark_jobs.analyze.runs import runs
from spark_jobs.analyze.samples import KINDS, empty_samples, sample_tables


def analyze(
    spark: SparkSession,
    config: DgmConfig,
    fingerprints: DataFrame,
    samples: Mapping[str, DataFrame],
    now: datetime,
) -> dict[str, DataFrame]:
    """Every table of dgm.published (name -> DataFrame of its columns) from FINGERPRINT
    rows of all topics (an external sink's under its sink_names() name) and the sample kinds
    (a missing kind counts as empty). `now` is aware UTC, the time the fingerprints are
    complete up to (the audit's horizon): losses need `now - grace_s` and group commits
    sampled by `now`."""
    settings = config.analysis
    samples = {k: samples[k] if k in samples else empty_samples(spark, k) for k in KINDS}

    groups = pipelines_frame(spark, config).select("pipeline", "consumer_group")
    committed = {
        (r["pipeline"], r["topic"], r["partition"]): r["committed_offset"]
        for r in loss.latest_committed(samples["group_offsets"], groups, now).toArrow().to_pylist()
    }
    shared = Shared()
    record_tables, counts = fingerprint_tables(config, fingerprints, committed, now, shared)
    fault_rows = faults(spark, config, samples["events"], samples["producers"]).toArrow()
    verdicts, pipeline_windows = pipeline_tables(config, counts, counted_faults(config, fault_rows))
    return shared.hold(
        {
            tables.RUNS.name: runs(spark, config, fingerprints, samples),
            tables.VERDICTS.name: _frame(spark, verdicts, tables.VERDICTS),
            tables.PIPELINE_WINDOWS.name: _frame(spark, pipeline_windows, tables.PIPELINE_WINDOWS),
            **record_tables,
            **sample_tables(samples),
            tables.GROUP_STATUS.name: group_status(
                samples["group_offsets"], settings.group_status_window
            ),
            tables.FAULTS.name: _frame(spark, fault_rows, tables.FAULTS),
        }
    )


def _frame(spark: SparkSession, data: Published, table: tables.Table) -> DataFrame:
    """Rows worked out on the driver as a DataFrame of `table`'s columns, like the others."""
    return conform(spark.createDataFrame(arrow_of(data, table)), table)
