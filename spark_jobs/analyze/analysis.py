"""Every published table of dgm.published from fingerprints and collector samples.

`analyze` takes the fingerprints as a DataFrame and the samples as Arrow, and gives each
contract table's rows (columns and types exactly as dgm.published declares them). The
fingerprint-wide work runs in Spark (engine.py's passes, over every fingerprint on a rebuild
and over a cycle's touched ids otherwise: incremental.py); the sample-side tables are
worked out on the driver from the sample files (samples.py). The words are docs/design.md's;
the rules live in the duplicates, loss and verdict modules beside this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from dgm import published as tables
from dgm.config_schema import DgmConfig
from spark_jobs.analyze.faults import faults
from spark_jobs.analyze.group_status import group_status
from spark_jobs.analyze.incremental import Change, Engine
from spark_jobs.analyze.loss import latest_committed
from spark_jobs.analyze.pipeline_metrics import counted_faults, pipeline_tables
from spark_jobs.analyze.publish import Published
from spark_jobs.analyze.runs import runs
from spark_jobs.analyze.samples import sample_tables, with_every_kind


def analyze(
    spark: SparkSession,
    config: DgmConfig,
    fingerprints: DataFrame,
    samples: Mapping[str, pa.Table],
    now: datetime,
    fingerprint_count: int | None = None,
    engine: Engine | None = None,
    change: Change | None = None,
) -> dict[str, Published]:
    """Every table of dgm.published (name -> its rows: a DataFrame of its columns for the
    fingerprint-wide tables, Arrow or row dicts for the rest) from FINGERPRINT rows of all
    topics (an external sink's under its sink_names() name) and the sample kinds (a missing
    kind counts as empty). `now` is aware UTC, the time the fingerprints are complete up to
    (the audit's horizon): losses need `now - grace_s` and group commits sampled by `now`.
    `fingerprint_count` is how many rows `fingerprints` has, when the caller counted them.
    A long-running caller passes its `engine` and the `change` of the fingerprints since its
    last call (incremental.py); without them every table is rebuilt."""
    samples = with_every_kind(samples)
    committed = latest_committed(samples["group_offsets"], config, now)
    engine = engine or Engine()
    change = change or Change(kept=fingerprints)
    record_tables, counts = engine.cycle(config, change, committed, now, fingerprint_count)
    fault_rows = faults(config, samples["events"], samples["producers"])
    verdicts, pipeline_windows = pipeline_tables(config, counts, counted_faults(config, fault_rows))
    if fingerprint_count is None:
        fingerprint_count = fingerprints.count()
    master = str(spark.sparkContext.master)
    return {
        tables.RUNS.name: runs(config, fingerprint_count, samples, master),
        tables.VERDICTS.name: verdicts,
        tables.PIPELINE_WINDOWS.name: pipeline_windows,
        **record_tables,
        **sample_tables(samples),
        tables.GROUP_STATUS.name: group_status(
            samples["group_offsets"], config.analysis.group_status_window
        ),
        tables.FAULTS.name: fault_rows,
    }
