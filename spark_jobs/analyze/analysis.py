"""Every published table of dgm.contracts.published from fingerprints and collector samples.

`analyze` takes the fingerprints (one Fingerprints value) and the samples as Arrow, and gives
each contract table's rows (columns and types exactly as dgm.contracts.published declares them). The
fingerprint-wide work runs in Spark (passes.py, over every fingerprint on a rebuild and over
a cycle's touched ids otherwise: the Engine of engine.py); the sample-side tables are
worked out on the driver from the sample files (samples.py). The words are docs/design.md's;
the rules live in the duplicates, loss and verdict modules beside this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

import pyarrow as pa
from pyspark.sql import SparkSession

from dgm.config.document import DgmConfig
from dgm.contracts import published as tables
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze import integrity
from spark_jobs.analyze.claims import held_claims, latest_committed, unread
from spark_jobs.analyze.cluster_columns import with_cluster_columns
from spark_jobs.analyze.copy_batches import CopyBatches
from spark_jobs.analyze.engine import Engine
from spark_jobs.analyze.explain_table import explained_duplicates
from spark_jobs.analyze.faults import faults
from spark_jobs.analyze.group_status import group_status
from spark_jobs.analyze.lag_seconds import lagged_group_offsets
from spark_jobs.analyze.latency_tables import with_latency
from spark_jobs.analyze.pipeline_metrics import counted_faults, pipeline_tables
from spark_jobs.analyze.publish import Published
from spark_jobs.analyze.runs import runs
from spark_jobs.analyze.samples import sample_tables, with_every_kind
from spark_jobs.analyze.share_groups import named_duplicates, named_losses, share_group_pipelines
from spark_jobs.analyze.stages import pipeline_stages
from spark_jobs.sampling import kept_fingerprints


def analyze(
    spark: SparkSession,
    config: DgmConfig,
    fingerprints: Fingerprints,
    samples: Mapping[str, pa.Table],
    now: datetime,
    engine: Engine | None = None,
    copy_batches: CopyBatches | None = None,
    sinks_read_to: Mapping[str, datetime | None] | None = None,
) -> dict[str, Published]:
    """Every table of dgm.contracts.published (name -> its rows: a DataFrame of its columns for the
    fingerprint-wide tables, Arrow or row dicts for the rest) from FINGERPRINT rows of all
    topics (an external sink's under its sink_names() name) and the sample kinds (a missing
    kind counts as empty). `now` is aware UTC, the time the fingerprints are complete up to
    (the audit's horizon): losses need `now - grace_s` and group commits sampled by `now`.
    A long-running caller passes its `engine`, and fingerprints that say how they changed
    since its last call (audit.incremental_load); without them every table is rebuilt.
    `copy_batches` reads the batch headers of duplicate copies (explain.py); a long-running
    caller keeps one, so each copy is read once. `sinks_read_to` (claims.sinks_read_to) holds
    back the claims of a pipeline whose sinks the audit read only up to an earlier time."""
    samples = with_every_kind(samples)
    # A sampled pipeline's kept ids only: the external sinks' snapshots are whole, and
    # batches audited at another share may hold more (dgm/contracts/sampling.py).
    fingerprints = kept_fingerprints(fingerprints, config.topic_one_in())
    committed = latest_committed(samples["group_offsets"], config, now, sinks_read_to)
    engine = engine or Engine()
    if engine.state is not None and sinks_read_to:
        committed = held_claims(committed, engine.state.ctx.claimed, unread(sinks_read_to))
    if fingerprints.count is None:  # counted once: the runs table and the shuffles' sizes
        fingerprints = replace(fingerprints, count=fingerprints.whole.count())
    record_tables, counts = engine.cycle(config, fingerprints, committed, now)
    assert engine.state is not None  # a cycle leaves its state
    ctx = engine.state.ctx
    record_tables, truncations = integrity.applied(
        config,
        record_tables,
        fingerprints.displaced,
        fingerprints.whole,
        ctx.window_us,
        integrity.cutoffs(config, ctx.cutoff_us, ctx.deadlines),
    )
    shared = share_group_pipelines(config, samples["group_offsets"])
    record_tables[tables.DUPLICATES.name] = named_duplicates(
        explained_duplicates(
            config, record_tables[tables.DUPLICATES.name], samples, copy_batches or CopyBatches()
        ),
        shared,
    )
    record_tables[tables.LOST.name] = named_losses(record_tables[tables.LOST.name], shared)
    fault_rows = faults(config, samples["events"], samples["producers"])
    verdicts, pipeline_windows = pipeline_tables(
        config, counts, counted_faults(config, fault_rows), truncations, shared
    )
    latency, verdicts, pipeline_windows = with_latency(
        engine.state.counts, verdicts, pipeline_windows
    )
    stages = pipeline_stages(
        config,
        verdicts,
        record_tables[tables.TOPIC_WINDOWS.name],
        record_tables[tables.LOST.name],
        set(engine.state.runs["topic"]),  # the topics holding producer sessions' records
    )
    master = str(spark.sparkContext.master)
    lagged = lagged_group_offsets(samples["group_offsets"], samples["offsets"])
    found: dict[str, Published] = {
        tables.RUNS.name: runs(config, fingerprints.counted(), samples, master),
        tables.VERDICTS.name: verdicts,
        tables.PIPELINE_WINDOWS.name: pipeline_windows,
        tables.PIPELINE_STAGES.name: stages,
        tables.LATENCY_HISTOGRAM.name: latency,
        **record_tables,
        **sample_tables({**samples, "group_offsets": lagged}),
        tables.GROUP_STATUS.name: group_status(lagged, config.analysis.group_status_window),
        tables.FAULTS.name: fault_rows,
    }
    return with_cluster_columns(found, config)
