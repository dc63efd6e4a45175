"""Fingerprint batches: the rename commits, positions come from manifests, leftovers vanish,
compaction drops old fingerprints but keeps the positions, external snapshots replace."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from spark_jobs.audit.batches import MANIFEST
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.rewrite import compact
from spark_jobs.audit.store import FingerprintStore
from spark_jobs.schemas import FINGERPRINT
from tests.support.stored_fingerprints import NOW, RULES, rows


def coordinates(frame: Any) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in frame.collect())


def test_nothing_stored_loads_as_an_empty_frame_of_the_schema(spark: Any, tmp_path: Path) -> None:
    frame = FingerprintStore(tmp_path).load(spark)
    assert frame.count() == 0
    assert [f.name for f in frame.schema.fields] == [f.name for f in FINGERPRINT.fields]
    assert FingerprintStore(tmp_path).audited_positions() == {}


def test_a_batch_commits_its_ranges_and_counts(spark: Any, tmp_path: Path) -> None:
    with FingerprintStore(tmp_path).writer_lock():
        first = FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(0, 3), NOW), [OffsetRange("t", 0, 0, 4)], RULES
        )
        second = FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(4, 6), NOW), [OffsetRange("t", 0, 4, 6)], RULES
        )
    assert first.path.name < second.path.name
    assert first.path.name.startswith("batch-") and len(first.path.name) == len("batch-") + 20
    manifest = json.loads((first.path / MANIFEST).read_text())
    assert manifest["ranges"] == [
        {
            "topic": "t",
            "partition": 0,
            "start": 0,
            "end": 4,
            "skipped": 0,
            "before_start": 0,
            "records": 3,
        }
    ]
    assert manifest["id_rules"] == {"t": {"kind": "header", "name": "dgm-id"}}
    assert FingerprintStore(tmp_path).audited_positions() == {("t", 0): 6}
    assert coordinates(FingerprintStore(tmp_path).load(spark)) == [
        ("t", 0, o) for o in (0, 1, 2, 4, 5)
    ]


def test_a_batch_killed_before_its_rename_is_neither_read_nor_kept(
    spark: Any, tmp_path: Path
) -> None:
    """What SIGKILL between Spark's write and the rename leaves: a hidden dir with data and
    possibly the manifest. It counts for nothing and the next writer removes it."""
    with FingerprintStore(tmp_path).writer_lock():
        batch = FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(3), NOW), [OffsetRange("t", 0, 0, 3)], RULES
        )
    leftover = FingerprintStore(tmp_path).folder / ".tmp-killed"
    rows(spark, "t", range(3, 9), NOW).write.parquet(str(leftover))
    (leftover / MANIFEST).write_text((batch.path / MANIFEST).read_text())
    assert FingerprintStore(tmp_path).audited_positions() == {("t", 0): 3}
    assert FingerprintStore(tmp_path).load(spark).count() == 3
    with FingerprintStore(tmp_path).writer_lock():
        assert not leftover.exists()


def test_compaction_drops_old_fingerprints_and_keeps_positions(spark: Any, tmp_path: Path) -> None:
    old, new = NOW - timedelta(days=10), NOW - timedelta(hours=1)
    with FingerprintStore(tmp_path).writer_lock():
        FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(0, 2), old), [OffsetRange("t", 0, 0, 2)], RULES
        )
        mixed = rows(spark, "t", range(2, 4), old).union(rows(spark, "t", range(4, 6), new))
        FingerprintStore(tmp_path).write_batch(spark, mixed, [OffsetRange("t", 0, 2, 6)], RULES)
        FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(6, 8), new), [OffsetRange("t", 0, 6, 8)], RULES
        )
    compacted = compact(FingerprintStore(tmp_path), spark, timedelta(days=7), now=NOW)
    assert compacted is not None
    assert len(compacted.manifest["replaces"]) == 2
    assert compacted.ranges == [
        {
            "topic": "t",
            "partition": 0,
            "start": 0,
            "end": 6,
            "skipped": 0,
            "before_start": 0,
            "records": 2,
        }
    ]
    assert len(FingerprintStore(tmp_path).complete_batches()) == 2
    assert FingerprintStore(tmp_path).audited_positions() == {("t", 0): 8}
    assert coordinates(FingerprintStore(tmp_path).load(spark)) == [("t", 0, o) for o in range(4, 8)]
    assert compact(FingerprintStore(tmp_path), spark, timedelta(days=7), now=NOW) is None
    # Everything aged out: no fingerprint left, the position still there.
    assert (
        compact(FingerprintStore(tmp_path), spark, timedelta(hours=1), now=NOW + timedelta(days=1))
        is not None
    )
    assert FingerprintStore(tmp_path).load(spark).count() == 0
    assert FingerprintStore(tmp_path).audited_positions() == {("t", 0): 8}


def test_compaction_killed_before_removing_what_it_replaced_duplicates_nothing(
    spark: Any, tmp_path: Path
) -> None:
    old = NOW - timedelta(days=10)
    with FingerprintStore(tmp_path).writer_lock():
        FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(0, 4), old), [OffsetRange("t", 0, 0, 4)], RULES
        )
    (before,) = FingerprintStore(tmp_path).complete_batches()
    copy = tmp_path / "copy"
    shutil.copytree(before.path, copy)
    compacted = compact(FingerprintStore(tmp_path), spark, timedelta(days=20), now=NOW)
    assert compacted is None  # nothing old enough: untouched
    compacted = compact(FingerprintStore(tmp_path), spark, timedelta(days=7), now=NOW)
    assert compacted is not None
    shutil.copytree(copy, before.path)  # as if killed before the old batch was removed
    assert [b.path for b in FingerprintStore(tmp_path).complete_batches()] == [compacted.path]
    assert FingerprintStore(tmp_path).load(spark).count() == 0
    assert FingerprintStore(tmp_path).audited_positions() == {("t", 0): 4}
    with FingerprintStore(tmp_path).writer_lock():
        assert not before.path.exists()


def test_external_snapshots_replace_each_other_and_are_loaded(spark: Any, tmp_path: Path) -> None:
    def snapshot(n: int) -> pa.Table:
        data = [
            {"topic": "external:p:t", "partition": 0, "offset": o, "committed": True}
            for o in range(n)
        ]
        return pa.Table.from_pylist(data, schema=ARROW_FINGERPRINT)

    FingerprintStore(tmp_path).write_external("p", snapshot(3))
    FingerprintStore(tmp_path).write_external("p", snapshot(2))
    assert coordinates(FingerprintStore(tmp_path).load(spark)) == [
        ("external:p:t", 0, 0),
        ("external:p:t", 0, 1),
    ]
    assert FingerprintStore(tmp_path).remove_external_except({"p"}) == []
    assert FingerprintStore(tmp_path).remove_external_except(set()) == ["p"]
    assert FingerprintStore(tmp_path).load(spark).count() == 0


def test_a_damaged_batch_is_set_aside_and_its_offsets_are_audited_again(
    spark: Any, tmp_path: Path
) -> None:
    with FingerprintStore(tmp_path).writer_lock():
        first = FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(0, 4), NOW), [OffsetRange("t", 0, 0, 4)], RULES
        )
        FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(4, 6), NOW), [OffsetRange("t", 0, 4, 6)], RULES
        )
    part = max(first.path.glob("*.parquet"), key=lambda p: p.stat().st_size)
    part.write_bytes(part.read_bytes()[:20])  # truncated on disk
    with FingerprintStore(tmp_path).writer_lock():  # every writer (audit, compact) checks on entry
        pass
    assert not first.path.exists() and (first.path.with_name(f"damaged-{first.path.name}")).is_dir()
    # The second batch still reads; the first one's offsets are to be audited again.
    assert coordinates(FingerprintStore(tmp_path).load(spark)) == [("t", 0, 4), ("t", 0, 5)]
    assert FingerprintStore(tmp_path).damaged_ranges() == {
        first.path.name: [OffsetRange("t", 0, 0, 4)]
    }
    with FingerprintStore(tmp_path).writer_lock():
        FingerprintStore(tmp_path).write_batch(
            spark, rows(spark, "t", range(0, 4), NOW), [OffsetRange("t", 0, 0, 4)],
            RULES, reaudits=[first.path.name],
        )  # fmt: skip
    assert FingerprintStore(tmp_path).damaged_ranges() == {}
    assert (
        compact(FingerprintStore(tmp_path), spark, timedelta(days=1), NOW + timedelta(days=2))
        is not None
    )
    assert (
        FingerprintStore(tmp_path).damaged_ranges() == {}
    )  # a compaction keeps what was audited again
    assert FingerprintStore(tmp_path).audited_positions() == {("t", 0): 6}
