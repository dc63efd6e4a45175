"""Counting Parquet part files on the driver agrees with Spark counting the same files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from spark_jobs.audit.scratch import Scratch
from spark_jobs.audit.written import part_files, written
from spark_jobs.schemas import FINGERPRINT

BASE = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def rows(count: int, topics: int = 3) -> list[dict[str, Any]]:
    """Fingerprint rows over several topics and partitions, some timestamps null."""
    found = []
    for n in range(count):
        stamp = None if n % 7 == 0 else BASE + timedelta(milliseconds=(n * 7919) % 100_000)
        found.append(
            {
                "topic": f"t{n % topics}",
                "partition": n % 5,
                "offset": n,
                "timestamp": stamp,
                "message_id": f"m{n}",
                "committed": True,
            }
        )
    return found


def spark_counts(spark: Any, folder: Path) -> dict[tuple[str, int], tuple[int, Any, Any]]:
    frame = spark.read.schema(FINGERPRINT).parquet(str(folder))
    stats = frame.groupBy("topic", "partition").agg({"*": "count", "timestamp": "min"})
    highest = {
        (r["topic"], r["partition"]): r["max(timestamp)"]
        for r in frame.groupBy("topic", "partition").agg({"timestamp": "max"}).collect()
    }
    return {
        (r["topic"], r["partition"]): (
            r["count(1)"],
            r["min(timestamp)"],
            highest[(r["topic"], r["partition"])],
        )
        for r in stats.collect()
    }


def test_counts_and_timestamps_equal_sparks_over_many_files(spark: Any, tmp_path: Path) -> None:
    made = spark.createDataFrame(rows(5_000), FINGERPRINT).repartition(4)
    made.write.parquet(str(tmp_path / "out"))
    assert len(part_files(tmp_path / "out")) == 4

    counted = written(part_files(tmp_path / "out"))
    expected = spark_counts(spark, tmp_path / "out")
    assert set(counted) == set(expected)
    for key, (rows_, lowest, highest) in expected.items():
        # Spark gives naive datetimes in the session's zone (UTC here).
        assert counted[key].rows == rows_
        assert counted[key].lowest == lowest.replace(tzinfo=UTC)
        assert counted[key].highest == highest.replace(tzinfo=UTC)
    assert sum(w.rows for w in counted.values()) == 5_000


def test_a_partition_with_only_null_timestamps_has_no_bounds(spark: Any, tmp_path: Path) -> None:
    only_null = [{**r, "timestamp": None} for r in rows(10, topics=1)]
    spark.createDataFrame(only_null, FINGERPRINT).write.parquet(str(tmp_path / "out"))
    counted = written(part_files(tmp_path / "out"))
    assert {k: (w.rows, w.lowest, w.highest) for k, w in counted.items()} == {
        ("t0", p): (2, None, None) for p in range(5)
    }


def test_scratch_chunks_count_apart_and_are_removed(spark: Any, tmp_path: Path) -> None:
    scratch = Scratch(tmp_path)
    all_rows = rows(600)
    first = scratch.write(spark.createDataFrame(all_rows[:200], FINGERPRINT))
    second = scratch.write(spark.createDataFrame(all_rows[200:], FINGERPRINT))
    assert sum(first.values()) == 200 and sum(second.values()) == 400
    assert scratch.frame(spark).count() == 600
    names = [f.name for f in scratch.files()]
    assert len(names) == len(set(names))  # one folder can hold them all
    assert scratch.folder.name.startswith(".")  # hidden: a killed writer's leftover
    scratch.remove()
    assert not scratch.folder.exists()
