"""Small fingerprint batches merged, so their number stays bounded however long dgm runs.

Every audit commits one batch (FingerprintStore). At a cycle every few seconds that is tens
of thousands of batch directories a week, each listed, its manifest parsed and its files
planned by Spark every cycle. So the newest FANOUT batches are rewritten as one whenever the
oldest of them holds no more records than the other FANOUT - 1 together. A big batch is
therefore merged only with about as much again (never rewritten to absorb a few small ones),
so a fingerprint is rewritten about log2(records retained) times at most, and the batches
left grow geometrically with age: a few dozen, not one per cycle.

Only a run of batches that continue each other is merged: per topic-partition each range
starts where the run's previous one ended (not so across a re-audit of a damaged batch or a
recreated topic), so the merged manifest's one range per partition is exact. The newest
batches are merged, so the merged batch, which takes the newest name, carries the newest
topic ids. Crash-safe like a compaction: the merged batch lists the ones it replaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from dgm.contracts.samples import Key
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.rewrite import replace_batches
from spark_jobs.audit.store import FingerprintStore

FANOUT = 8


def continuous(run: Sequence[Batch]) -> bool:
    """Whether each partition's ranges in `run` follow one another without gap or overlap."""
    ends: dict[Key, int] = {}
    for batch in run:
        for r in batch.ranges:
            key = (r["topic"], r["partition"])
            if key in ends and ends[key] != r["start"]:
                return False
            ends[key] = r["end"]
    return True


def mergeable(batches: Sequence[Batch]) -> list[Batch] | None:
    """The newest FANOUT of `batches` (oldest first) when they are to be merged, else None."""
    run = list(batches[-FANOUT:])
    if len(run) < FANOUT:
        return None
    records = [int(b.manifest["records"]) for b in run]
    if records[0] > sum(records[1:]):
        return None
    return run if continuous(run) else None


def merge_small_batches(spark: SparkSession, state_dir: Path) -> list[Batch]:
    """Merge while the newest batches are mergeable; the batches written, oldest first."""
    store = FingerprintStore(state_dir)
    written = []
    with store.writer_lock():
        while (run := mergeable(store.complete_batches())) is not None:
            written.append(replace_batches(store, spark, run))
    return written
