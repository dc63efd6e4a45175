"""Batches rewritten as one: retention's compaction, and the rewrites of merges
(merge.py), recreated topics (recreated.py), changed JDBC sinks (jdbc_audit.py) and
truncated partitions (truncation.py).

A rewrite writes one new batch holding the kept fingerprints of the batches it replaces and
their ranges (so the positions survive), listing them in `replaces`; readers ignore a batch a
complete batch replaces, so a crash before the old dirs are gone duplicates nothing
(FingerprintStore.recover removes them). The fingerprints a re-read found Kafka no longer
holds as audited (audit/reread.py) leave the batches for the `_anomalies` folder of the batch
that rewrote them (DISPLACED rows; Spark skips a folder whose name starts with '_'); every
rewrite carries them over, as it carries fingerprints (retention drops them by the same
rule), and the newest JDBC sink entry of each pipeline.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.fingerprints import DISPLACED_DIR
from dgm.contracts.samples import Key
from spark_jobs.audit.batches import (
    Batch,
    merged_ranges,
    newest_external,
    reaudited,
    recorded_topic_ids,
)
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.schemas import DISPLACED, FINGERPRINT


def compact(
    store: FingerprintStore, spark: SparkSession, retention: timedelta, now: datetime | None = None
) -> Batch | None:
    """Drop fingerprints whose Kafka timestamp is older than `retention`: the batches
    holding any older than `retention` plus `compaction_slack` are rewritten as one batch
    keeping the rest and every range (the audited positions). None when nothing is old
    enough. Crash-safe: see the module docstring."""
    cutoff = (now or datetime.now(UTC)) - retention
    due = cutoff - compaction_slack(retention)
    with store.writer_lock():
        batches = store.complete_batches()
        old = [b for b in batches if (t := b.min_timestamp()) is not None and t < due]
        if not old:
            return None
        chosen = old + [b for b in batches if b.manifest["records"] == 0 and b not in old]
        unexpired = F.col("timestamp").isNull() | (F.col("timestamp") >= F.lit(cutoff))
        return replace_batches(store, spark, chosen, unexpired)


def replace_batches(
    store: FingerprintStore,
    spark: SparkSession,
    chosen: Sequence[Batch],
    keep: Column | None = None,
    without: Collection[str] = (),
    forget_external: Collection[str] = (),
    rows: DataFrame | None = None,
    ends: Mapping[Key, int] | None = None,
    displaced: DataFrame | None = None,
) -> Batch:
    """Rewrite `chosen` as one batch holding their rows that match `keep` (all without
    it), and their ranges, id rules and topic ids except those of the topics `without`,
    and the newest JDBC sink entry of each pipeline but those `forget_external` names;
    then retire them. Call under the store's `writer_lock`. Crash-safe: the new batch lists
    those it replaces. Their displaced fingerprints go with them (those matching `keep`). A
    re-read's rewrite gives the `rows` instead, the partitions whose audited range now
    `ends` earlier, and the `displaced` fingerprints it adds."""
    paths = [str(b.path) for b in chosen]
    rewritten = rows is not None
    if rows is None:
        rows = spark.read.schema(FINGERPRINT).parquet(*paths)
        if keep is not None:
            rows = rows.filter(keep)
    aside = [str(b.path / DISPLACED_DIR) for b in chosen if (b.path / DISPLACED_DIR).is_dir()]
    kept_aside = spark.read.schema(DISPLACED).parquet(*aside) if aside else None
    if kept_aside is not None and keep is not None:
        kept_aside = kept_aside.filter(keep)
    if kept_aside is not None and without:
        kept_aside = kept_aside.filter(~F.col("topic").isin(*sorted(without)))
    if displaced is not None:
        kept_aside = displaced if kept_aside is None else kept_aside.unionByName(displaced)
    ranges = [
        OffsetRange(r.topic, r.partition, r.start, min(r.end, (ends or {}).get(r.key, r.end)),
                    r.skipped, r.before_start)
        for r in merged_ranges(chosen)
        if r.topic not in without
    ]  # fmt: skip
    rules = {
        t: MessageIdRule(**r)
        for b in chosen
        for t, r in b.manifest["id_rules"].items()
        if t not in without
    }
    ids = {t: i for t, i in recorded_topic_ids(chosen).items() if t not in without}
    names = [b.path.name for b in chosen]
    external = {
        name: {k: v for k, v in entry.items() if k != "records"}
        for name, entry in newest_external(chosen).items()
        if name not in forget_external
    }
    expected = {p: e for b in chosen for p, e in b.manifest.get("expected", {}).items()}
    reaudits = sorted(reaudited(chosen))
    batch = store.write_batch(
        spark,
        rows,
        ranges,
        rules,
        names,
        ids,
        reaudits,
        external,
        expected=expected,
        displaced=kept_aside,
        rewritten=rewritten,
    )
    retire(chosen)
    return batch


def compaction_slack(retention: timedelta) -> timedelta:
    """How much older than `retention` a batch's oldest fingerprint may get before its batch
    is rewritten. Without it, the batch a compaction writes starts at the cutoff, so under
    steady traffic it held an expired fingerprint again one cycle later and every cycle
    rewrote everything retained; with it, a rewrite comes at most once per slack."""
    return min(timedelta(hours=1), retention / 24)


def retire(replaced: Sequence[Batch]) -> None:
    """Delete batches a committed batch replaces: each hidden first (atomic), then removed,
    so no half-deleted batch is ever visible (a crash in between: FingerprintStore.recover)."""
    for b in replaced:
        trash = b.path.with_name(f".trash-{b.path.name}")
        os.rename(b.path, trash)
        shutil.rmtree(trash)
