"""Merging small batches: the policy keeps the batch count and the rewrites per fingerprint
logarithmic under any batch sizes; a merge keeps every fingerprint and position exactly and
never merges batches that do not continue each other."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from spark_jobs.audit.batches import Batch
from spark_jobs.audit.merge import FANOUT, merge_small_batches, mergeable
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.store import FingerprintStore
from tests.support.stored_fingerprints import NOW, RULES
from tests.support.stored_fingerprints import rows as fingerprint_rows


def fake(records: int, start: int, rewrites: int = 0) -> Batch:
    ranges = [{"topic": "t", "partition": 0, "start": start, "end": start + records}]
    return Batch(Path(f"b{start}"), {"records": records, "ranges": ranges, "rewrites": rewrites})


def test_batches_and_rewrites_stay_logarithmic_whatever_the_batch_sizes() -> None:
    rng = random.Random(7)
    for sizes in (
        [1] * 5000,  # tiny cycles
        [rng.choice([0, 0, 1, 60, 70, 5000]) for _ in range(5000)],  # idle, bursts
        [rng.randint(9_000, 11_000) for _ in range(3000)],  # steady 10k records per cycle
    ):
        batches: list[Batch] = []
        offset = most = worst = 0
        for size in sizes:
            batches.append(fake(size, offset))
            offset += size
            while (run := mergeable(batches)) is not None:
                records = sum(b.manifest["records"] for b in run)
                rewrites = max(b.manifest["rewrites"] for b in run) + 1
                batches[-FANOUT:] = [fake(records, run[0].ranges[0]["start"], rewrites)]
                worst = max(worst, rewrites)
            most = max(most, len(batches))
        total = sum(sizes)
        assert sum(b.manifest["records"] for b in batches) == total
        assert most <= 3 * FANOUT, (most, sizes[:3])
        assert worst <= total.bit_length() + FANOUT, (worst, total)


def rows(spark: Any, offsets: range) -> Any:
    return fingerprint_rows(spark, "t", offsets, NOW)


def test_a_merge_keeps_every_fingerprint_and_position_and_skips_a_gap(
    spark: Any, tmp_path: Path
) -> None:
    with FingerprintStore(tmp_path).writer_lock():
        for n in range(FANOUT):
            first = 2 * n
            FingerprintStore(tmp_path).write_batch(spark, rows(spark, range(first, first + 2)),
                        [OffsetRange("t", 0, first, first + 2)], RULES)  # fmt: skip
    (merged,) = merge_small_batches(spark, tmp_path)
    assert [b.path for b in FingerprintStore(tmp_path).complete_batches()] == [merged.path]
    assert [(r["start"], r["end"], r["records"]) for r in merged.ranges] == [(0, 16, 16)]
    assert FingerprintStore(tmp_path).audited_positions() == {("t", 0): 2 * FANOUT}
    offsets = sorted(r.offset for r in FingerprintStore(tmp_path).load(spark).collect())
    assert offsets == list(range(2 * FANOUT))

    # A re-audit of older offsets does not continue the newest batches: nothing merges.
    with FingerprintStore(tmp_path).writer_lock():
        FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, range(0, 1)), [OffsetRange("t", 0, 0, 1)], RULES
        )
        for n in range(FANOUT - 1):
            first = 16 + n
            FingerprintStore(tmp_path).write_batch(spark, rows(spark, range(first, first + 1)),
                        [OffsetRange("t", 0, first, first + 1)], RULES)  # fmt: skip
    assert merge_small_batches(spark, tmp_path) == []
    assert len(FingerprintStore(tmp_path).complete_batches()) == FANOUT + 1
