"""The fingerprints kept from run to run: only new batches are read, a merge keeps the kept
rows, and anything that changes the rows otherwise makes the next load read everything;
whatever happened, a load gives exactly what reading the store afresh gives."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark import StorageLevel

from spark_jobs.audit.incremental_load import KeptFingerprints
from spark_jobs.audit.merge import FANOUT, merge_small_batches
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.rewrite import compact
from spark_jobs.audit.store import FingerprintStore
from tests.support.stored_fingerprints import NOW, RULES, rows


def add(spark: Any, state_dir: Path, first: int, count: int, age_h: float = 0) -> None:
    """One audit's batch: offsets [first, first + count) of t/0, `age_h` hours old."""
    at = NOW - timedelta(hours=age_h)
    with FingerprintStore(state_dir).writer_lock():
        FingerprintStore(state_dir).write_batch(
            spark, rows(spark, "t", range(first, first + count), at),
            [OffsetRange("t", 0, first, first + count)], RULES,
        )  # fmt: skip


def offsets(frame: Any) -> list[int]:
    return sorted(r.offset for r in frame.select("offset").collect())


def same_as_the_store(kept: KeptFingerprints, spark: Any, state_dir: Path) -> list[int]:
    found = offsets(kept.load().whole)
    assert found == offsets(FingerprintStore(state_dir).load(spark))
    return found


def test_only_new_batches_are_read_and_a_merge_keeps_the_rows(spark: Any, tmp_path: Path) -> None:
    kept = KeptFingerprints(spark, tmp_path)
    assert offsets(kept.load().whole) == []
    add(spark, tmp_path, 0, 3)
    assert same_as_the_store(kept, spark, tmp_path) == [0, 1, 2]
    assert kept.batches_read == 1
    for n in range(1, FANOUT):
        add(spark, tmp_path, 3 * n, 3)
        assert len(same_as_the_store(kept, spark, tmp_path)) == 3 * (n + 1)
        assert kept.batches_read == 1
    (merged,) = merge_small_batches(spark, tmp_path)
    # The merged batch holds the kept rows: nothing is read, though the files they came
    # from are gone.
    assert [b.path for b in FingerprintStore(tmp_path).complete_batches()] == [merged.path]
    assert same_as_the_store(kept, spark, tmp_path) == list(range(3 * FANOUT))
    assert kept.batches_read == 0
    add(spark, tmp_path, 3 * FANOUT, 2)
    assert len(same_as_the_store(kept, spark, tmp_path)) == 3 * FANOUT + 2
    assert kept.batches_read == 1
    kept.reset()
    assert len(same_as_the_store(kept, spark, tmp_path)) == 3 * FANOUT + 2
    assert kept.batches_read == 2


def test_retention_s_compaction_makes_the_next_load_read_everything(
    spark: Any, tmp_path: Path
) -> None:
    kept = KeptFingerprints(spark, tmp_path)
    add(spark, tmp_path, 0, 4, age_h=30)  # beyond a day's retention
    add(spark, tmp_path, 4, 4)
    assert len(same_as_the_store(kept, spark, tmp_path)) == 8
    assert compact(FingerprintStore(tmp_path), spark, timedelta(hours=24), now=NOW) is not None
    assert same_as_the_store(kept, spark, tmp_path) == [4, 5, 6, 7]
    assert kept.batches_read == len(FingerprintStore(tmp_path).complete_batches())


def test_a_batch_gone_without_a_replacement_makes_the_next_load_read_everything(
    spark: Any, tmp_path: Path
) -> None:
    kept = KeptFingerprints(spark, tmp_path)
    add(spark, tmp_path, 0, 2)
    add(spark, tmp_path, 2, 2)
    assert len(same_as_the_store(kept, spark, tmp_path)) == 4
    oldest = FingerprintStore(tmp_path).complete_batches()[0].path
    oldest.rename(oldest.with_name(f"damaged-{oldest.name}"))  # as set_aside_damaged does
    assert same_as_the_store(kept, spark, tmp_path) == [2, 3]
    assert kept.batches_read == 1


def test_many_batches_are_consolidated_into_one_kept_frame(spark: Any, tmp_path: Path) -> None:
    kept = KeptFingerprints(spark, tmp_path)
    for n in range(20):
        # Offsets that do not continue each other, so a merge never takes them.
        add(spark, tmp_path, 10 * n, 1)
        kept.load()
    assert len(kept.pieces) <= 16
    assert same_as_the_store(kept, spark, tmp_path) == [10 * n for n in range(20)]
    # Read pieces and the consolidated one alike: cached batches kept as objects, which a
    # scan reads without deserializing them first (PySpark's MEMORY_AND_DISK would not).
    levels = [piece.storageLevel for piece in kept.pieces]
    assert all(level == StorageLevel.MEMORY_AND_DISK_DESER for level in levels), levels
