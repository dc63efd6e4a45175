"""The audit's step for PostgreSQL/JDBC external sinks: the rows added since the last read,
stored as an append-only fingerprint batch whose manifest carries the position read up to.

A JDBC sink is never read whole each cycle (a file sink's snapshot is): external_jdbc reads
the rows whose incremental column is above the pipeline's position, and they are written
through FingerprintStore.write_batch like a Kafka range. The position is not kept apart: the
batch's manifest holds, per pipeline, `upto` (the position after its rows), `sink` (a hash of
what shapes the rows: kind, url, table, incremental, id and source columns; no credentials)
and `topic`. The rename that commits the batch commits the rows and the position together,
so a crash anywhere re-reads from the last committed position: nothing lost, nothing twice.
A pipeline's position is the `upto` of the newest complete batch naming it with the sink's
current hash (positions only grow; a merge or compaction carries the newest entry over).

When a pipeline's sink changes (another url, table or column) or it has no JDBC sink any
more, its rows and entries are rewritten away first (rewrite.replace_batches,
crash-safe like a compaction), so the sink is then read from its start.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from datetime import date, datetime
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.config.document import DgmConfig
from dgm.config.external_sinks import FILE_KINDS
from dgm.config.pipelines import PipelineConfig
from spark_jobs.audit.batches import Batch, newest_external
from spark_jobs.audit.external_jdbc import IncrementalRead, Position, read_incremental
from spark_jobs.audit.rewrite import replace_batches
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.sampling import kept

Progress = Callable[[str], None]


def jdbc_pipelines(config: DgmConfig) -> list[PipelineConfig]:
    return [
        p
        for p in config.pipelines
        if p.external_sink is not None and p.external_sink.kind not in FILE_KINDS
    ]


def sink_identity(pipeline: PipelineConfig) -> str:
    """A hash of what shapes the pipeline's JDBC rows; a change means read it again."""
    sink = pipeline.external_sink
    assert sink is not None
    shape = [
        sink.kind,
        sink.url,
        sink.table,
        sink.incremental_column,
        sink.id_column,
        list(sink.source_columns),
    ]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:32]


def encode(position: Position) -> dict[str, Any]:
    """A position as JSON: an integer, or a date/time as ISO text (a time stated in UTC)."""
    if isinstance(position, datetime):
        return {"timestamp": position.astimezone().isoformat()}
    if isinstance(position, date):
        return {"date": position.isoformat()}
    return {"int": int(position)}


def decode(found: Mapping[str, Any]) -> Position:
    if "timestamp" in found:
        return datetime.fromisoformat(found["timestamp"])
    if "date" in found:
        return date.fromisoformat(found["date"])
    return int(found["int"])


def positions(batches: list[Batch], config: DgmConfig) -> dict[str, Position]:
    """pipeline -> the position its committed JDBC rows reach, for the current sinks."""
    wanted = {p.name: sink_identity(p) for p in jdbc_pipelines(config)}
    return {
        name: decode(entry["upto"])
        for name, entry in newest_external(batches).items()
        if wanted.get(name) == entry["sink"]
    }


def forget_changed(spark: SparkSession, store: FingerprintStore, config: DgmConfig) -> list[str]:
    """Rewrite away the rows and entries of pipelines whose JDBC sink changed or is gone;
    the pipelines forgotten. Call under the store's writer lock."""
    wanted = {p.name: sink_identity(p) for p in jdbc_pipelines(config)}
    batches = store.complete_batches()
    stale = {
        name: entry["topic"]
        for b in batches
        for name, entry in b.manifest.get("external", {}).items()
        if wanted.get(name) != entry["sink"]
    }
    if not stale:
        return []
    chosen = [b for b in batches if set(b.manifest.get("external", {})) & set(stale)]
    keep = ~F.col("topic").isin(sorted(set(stale.values())))
    replace_batches(store, spark, chosen, keep, forget_external=set(stale))
    return sorted(stale)


def audit_jdbc(
    spark: SparkSession, config: DgmConfig, records: dict[str, int], progress: Progress
) -> Batch | None:
    """Read each JDBC sink's rows added since its position into one committed batch (None
    when none was added); `records` gets the rows per sink name. Call under the store's
    writer lock."""
    store = FingerprintStore(config.state_dir)
    for name in forget_changed(spark, store, config):
        progress(f"audit: external sink of pipeline {name} changed or removed: read again")
    pipelines = jdbc_pipelines(config)
    if not pipelines:
        return None
    began = time.monotonic()
    after = positions(store.complete_batches(), config)
    reads: dict[str, tuple[PipelineConfig, IncrementalRead]] = {}
    for pipeline in pipelines:
        read = read_incremental(spark, pipeline, after.get(pipeline.name))
        if read.upto is not None and read.upto != read.after:
            reads[pipeline.name] = (pipeline, read)
    if not reads:
        return None
    frame: DataFrame = reduce(DataFrame.unionByName, (r.fingerprints for _, r in reads.values()))
    frame = kept(frame, config.topic_one_in())  # a sampled pipeline's kept ids only
    entries = {
        name: {
            "topic": p.sink_names()[-1],
            "sink": sink_identity(p),
            "upto": encode(r.upto),  # type: ignore[arg-type]  # not None: checked above
        }
        for name, (p, r) in reads.items()
    }
    batch = store.write_batch(spark, frame, [], {}, external=entries)
    seconds = time.monotonic() - began
    for name, entry in batch.manifest["external"].items():
        records[entry["topic"]] = int(entry["records"])
        progress(
            f"audit: external sink {entry['topic']}: {entry['records']} rows added "
            f"(up to {reads[name][0].external_sink.incremental_column} "  # type: ignore[union-attr]
            f"{decode(entry['upto'])}) in {seconds:.1f}s"
        )
    return batch
