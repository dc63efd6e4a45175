"""One cycle's re-read (audit/reread.py's plan and comparison) and, where a partition
diverged, the rewrite of its batches: its displaced fingerprints set aside, the records now at
their offsets fingerprinted in their place, its audited range ending where the audit resumes.

Runs in the audit under the store's writer lock, before the cycle's ranges are planned: a
rewritten partition's new range then starts where its rewrite ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.samples import Key, PartitionOffsets, SampleStore
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.registry_columns import Lookups, no_lookups
from spark_jobs.audit.reread import (
    COMPARED,
    WENT_BACK,
    Reread,
    RereadState,
    displaced,
    find_divergences,
    now_ids,
    plan_rereads,
    resume_at,
    went_back,
)
from spark_jobs.audit.rewrite import replace_batches
from spark_jobs.audit.store import FingerprintStore, empty_fingerprints
from spark_jobs.schemas import FINGERPRINT

# The Spark Kafka source's rows of some ranges, read_uncommitted.
Read = Callable[[Sequence[OffsetRange]], DataFrame]
# The fingerprints of some ranges as the audit makes them (committed or aborted), and what
# to call once they are written.
Fingerprint = Callable[[Sequence[OffsetRange]], tuple[DataFrame, Callable[[], None]]]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RereadReport:
    """What one cycle's re-read did."""

    offsets: int  # offsets read again (every window, the lower ones included)
    diverged: dict[Key, int]  # partition -> the offset its log diverges at
    ends: dict[Key, int]  # partition -> where its audited range ends now
    displaced: int  # fingerprints set aside


def held_from(batches: Iterable[Batch]) -> dict[Key, int]:
    """Per partition the lowest offset an audited range holds (before it: never audited)."""
    found: dict[Key, int] = {}
    for batch in batches:
        for r in batch.ranges:
            if r["end"] > r["start"]:
                key = (r["topic"], r["partition"])
                found[key] = min(found.get(key, r["start"]), r["start"])
    return found


def _overlaps(r: Mapping[str, Any], w: Reread) -> bool:
    """Whether batch range `r` holds offsets of window `w` (or at or past its high watermark)."""
    if (r["topic"], r["partition"]) != w.key or r["end"] <= r["start"]:
        return False
    return bool(r["end"] > w.start and (r["start"] < w.end or r["end"] > w.high_watermark))


def stored(
    spark: SparkSession,
    store: FingerprintStore,
    windows: Sequence[Reread],
    columns: Sequence[str] | None = None,
) -> DataFrame:
    """The stored fingerprints of the windows' topics, from the batches whose ranges hold
    offsets of `windows`; `columns` of them, every FINGERPRINT column without. Which rows
    are the windows' own is reread.compared's join with the windows: a filter naming each
    window (an OR of one term per partition) took minutes over 600 partitions, every
    fingerprint row tested against every term (bench/HISTORY.md, "The soak")."""
    by_key: dict[Key, list[Reread]] = {}
    for w in windows:
        by_key.setdefault(w.key, []).append(w)
    paths = [
        str(b.path)
        for b in store.complete_batches()
        if any(
            _overlaps(r, w) for r in b.ranges for w in by_key.get((r["topic"], r["partition"]), ())
        )
    ]
    if not paths:
        return empty_fingerprints(spark).select(*(columns or FINGERPRINT.names))
    frame = spark.read.schema(FINGERPRINT).parquet(*paths)
    topics = sorted({topic for topic, _ in by_key})
    # Pushed down to the Parquet files' row groups; the join does the rest.
    return frame.select(*(columns or FINGERPRINT.names)).where(F.col("topic").isin(topics))


def _of(keys: Iterable[Key], at_least: Mapping[Key, int] | None = None) -> Column:
    conditions = [
        (F.col("topic") == t)
        & (F.col("partition") == p)
        & (F.col("offset") >= (at_least or {}).get((t, p), 0))
        for t, p in sorted(keys)
    ]
    return reduce(lambda a, b: a | b, conditions)


def reread(
    spark: SparkSession,
    store: FingerprintStore,
    samples: SampleStore,
    sampled: Sequence[PartitionOffsets],
    rules: Mapping[str, MessageIdRule],
    share: float,
    new_offsets: int,
    read: Read,
    fingerprint: Fingerprint,
    progress: Progress,
    now: datetime | None = None,
    lookups: Lookups = no_lookups,
) -> RereadReport:
    """Read again what this cycle's plan says, rewrite the partitions that diverged, keep the
    state for the next cycle. Call under the store's writer lock. `lookups`: each topic's
    schema registry, for registry_field ids."""
    began = time.monotonic()
    state = RereadState.load(store.folder)
    moved, newest = went_back(samples, state.events_after)
    watched = [s for s in sampled if s.topic in rules]
    audited = store.audited_positions()
    held = held_from(store.complete_batches())
    windows, kept = plan_rereads(watched, audited, held, moved, state, new_offsets, share)
    kept.events_after = newest
    if not windows:
        kept.save(store.folder)
        return RereadReport(0, {}, {}, 0)
    by_key = {(s.topic, s.partition): s for s in watched}
    floors = {k: max(by_key[k].log_start_offset, held.get(k, 0)) for k in by_key}
    read_offsets: list[int] = []

    def read_now(these: Sequence[Reread]) -> DataFrame:
        read_offsets.append(sum(w.size for w in these))
        return now_ids(spark, read, these, rules, lookups)

    diverged = find_divergences(
        lambda these: stored(spark, store, these, COMPARED), read_now, windows, floors
    )
    ends: dict[Key, int] = {}
    count = 0
    if diverged:
        ends, count = _rewrite(spark, store, diverged, by_key, audited, read_now,
                               fingerprint, now or datetime.now(UTC))  # fmt: skip
        for key, at in sorted(diverged.items()):
            progress(
                f"audit: topic {key[0]} partition {key[1]} was truncated: its log diverges at "
                f"offset {at} from what was audited; the records past it are audited again "
                f"to {ends[key]}"
            )
    kept.save(store.folder)
    why = sorted({w.why for w in windows})
    progress(
        f"audit: {sum(read_offsets)} audited offsets of {len({w.key for w in windows})} "
        f"partitions read again ({', '.join(why)}) in {time.monotonic() - began:.1f}s: "
        f"{len(diverged)} truncated"
    )
    return RereadReport(sum(read_offsets), diverged, ends, count)


def _rewrite(
    spark: SparkSession,
    store: FingerprintStore,
    diverged: Mapping[Key, int],
    sampled: Mapping[Key, PartitionOffsets],
    audited: Mapping[Key, int],
    read_now: Callable[[Sequence[Reread]], DataFrame],
    fingerprint: Fingerprint,
    now: datetime,
) -> tuple[dict[Key, int], int]:
    """Rewrite the batches holding the diverged partitions' offsets from their divergence on:
    (where each partition's audited range ends now, the fingerprints displaced)."""
    ends = {k: resume_at(audited[k], d, sampled[k].lso) for k, d in diverged.items()}
    compare = [
        Reread(k[0], k[1], d, min(audited[k], sampled[k].high_watermark),
               sampled[k].high_watermark, sampled[k].lso, WENT_BACK)
        for k, d in sorted(diverged.items())
    ]  # fmt: skip
    aside = (
        displaced(stored(spark, store, compare), read_now(compare), compare)
        .withColumn("detected_at", F.lit(now).cast("timestamp"))
        .persist()
    )
    fresh_ranges = [OffsetRange(k[0], k[1], d, ends[k]) for k, d in diverged.items() if ends[k] > d]
    fresh, done = fingerprint(fresh_ranges)
    try:
        chosen = [
            b
            for b in store.complete_batches()
            if any(
                (key := (r["topic"], r["partition"])) in diverged and r["end"] > diverged[key]
                for r in b.ranges
            )
        ]
        paths = [str(b.path) for b in chosen]
        kept = spark.read.schema(FINGERPRINT).parquet(*paths).where(~_of(diverged, diverged))
        count = aside.count()
        replace_batches(
            store, spark, chosen, rows=kept.unionByName(fresh), ends=ends, displaced=aside
        )
    finally:
        done()
        aside.unpersist()
    return ends, count
