"""Collecting every table in one action gives each table exactly what its own toArrow gives."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pyspark.sql import functions as F

from spark_jobs.analyze.collect import collect_tables

AT = datetime(2026, 1, 1, 12, tzinfo=UTC)


def test_each_table_comes_back_as_its_own_to_arrow(spark: Any) -> None:
    base = spark.createDataFrame(
        [("a", 1, AT, ["x", "y"]), ("b", 2, None, None), ("a", 3, AT, [])],
        "topic string, n bigint, at timestamp, ids array<string>",
    )
    counts = base.groupBy("topic").agg(F.count("*").alias("copies"), F.max("at").alias("at"))
    frames = {
        "base": base,
        # A table reading what another reads (Spark may share the exchange), with other types.
        "counts": counts.withColumn("rate", F.col("copies") / F.lit(3.0)),
        "empty": base.where(F.lit(False)).select("topic", "ids"),
        "odd names": base.select(F.col("n").alias("a.b c"), F.lit(True).alias("flag")),
    }
    collected = collect_tables(frames)
    assert list(collected) == list(frames)
    for name, frame in frames.items():
        alone = frame.toArrow()
        together = collected[name]
        assert together.schema.names == alone.schema.names, name
        assert together.schema.types == alone.schema.types, name
        key = [(c, "ascending") for c in alone.schema.names if c not in ("ids", "at")]
        assert together.sort_by(key).to_pylist() == alone.sort_by(key).to_pylist(), name
    assert collected["empty"].num_rows == 0
    assert collected["base"].num_rows == 3


def test_no_frames_collect_nothing(spark: Any) -> None:
    assert collect_tables({}) == {}
