"""What the rebuild's stream pass would cost in the JVM: the pass as it is against window
functions over the same records, on generated fingerprints (bench/generated.py).

The stream pass (spark_jobs/analyze/passes.py, `streams`) ships every stream record into
Spark's Python workers, where order.judged finds the records behind and each stream's mark
and per_session the producer sessions' runs. At 10M fingerprints it ends last in the rebuild
(bench/HISTORY.md, "The rebuild at 10M: shuffle compression is not where the time goes").
This measures, on the records the rebuild hands the pass (captured from one real rebuild),
side by side in one process:

- `pass`: `engine._streams_of` as the rebuild calls it (shuffle, Python, results to the
  driver);
- `window`: the same records' committed ones through a window per stream ordered by offset
  (a record is behind when its position is below the highest one at a lower offset), each
  stream's highest position and offset, and the producer streams' runs of consecutive
  positions (position minus row number), the three results to the driver.

`window` is a sketch of the arithmetic, not dgm's rules: no marks carried in from an earlier
cycle, no aborted records in runs, no preceded_at. Its rows are counted beside the pass's,
and the records behind compared, to tell how far the sketch is from the pass.

    python -m bench.stream_pass_window [--size 10000000] [--reps 3] [--pipelines 10]
        [--partitions 50] [--master local[2]]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from bench import generated
from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze import engine as engine_module
from spark_jobs.analyze import passes
from spark_jobs.analyze.analysis import analyze
from spark_jobs.analyze.samples import read_samples
from spark_jobs.schemas import FINGERPRINT

STREAM = ["topic", "partition", "stream"]


def captured_rebuild(spark: Any, world: generated.World) -> tuple[DataFrame, Any, int, Any]:
    """One rebuild of `world`, keeping what it handed the stream pass: (fingerprints, Context,
    count, unstamped sinks)."""
    fingerprints = spark.read.schema(FINGERPRINT).parquet(str(world.folder)).cache()
    count = fingerprints.count()
    held: dict[str, Any] = {}
    original = engine_module._streams_of

    def keeping(whole: DataFrame, ctx: Any, rows: int, unstamped: Any) -> Any:
        held.update(ctx=ctx, unstamped=unstamped)
        return original(whole, ctx, rows, unstamped)

    engine_module._streams_of = keeping  # type: ignore[assignment]
    try:
        analyze(spark, generated.config(world.names), Fingerprints(fingerprints),
                read_samples(world.state), world.now, engine=engine_module.Engine())  # fmt: skip
    finally:
        engine_module._streams_of = original  # type: ignore[assignment]
    return fingerprints, held["ctx"], count, held["unstamped"]


def timed_pass(fingerprints: DataFrame, ctx: Any, count: int, unstamped: Any) -> tuple[float, int]:
    began = time.perf_counter()
    behind = engine_module._streams_of(fingerprints, ctx, count, unstamped)[1]
    return time.perf_counter() - began, len(behind)


def timed_window(fingerprints: DataFrame, ctx: Any, unstamped: Any) -> tuple[float, int]:
    began = time.perf_counter()
    records = passes.stream_records(fingerprints, ctx, unstamped=unstamped)
    # Built once (the lineage join among it), as the pass's one shuffle does.
    committed = records.where("committed").persist()
    before = (
        Window.partitionBy(*STREAM).orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    )
    flagged = committed.withColumn("highest_before", F.max("position").over(before))
    behind = flagged.where(F.col("position") < F.col("highest_before")).drop("highest_before")
    marks = committed.groupBy(*STREAM).agg(
        F.max("position").alias("position"), F.max("offset").alias("offset")
    )
    producer = committed.where(F.col("anomaly") == OrderAnomaly.OUT_OF_ORDER.value)
    ordered = Window.partitionBy(*STREAM).orderBy("position")
    island = F.col("position") - F.row_number().over(ordered)
    runs = (
        producer.withColumn("island", island)
        .groupBy(*STREAM, "island")
        .agg(
            F.min("position").alias("start"),
            F.max("position").alias("end"),
            F.min("timestamp").alias("start_ts"),
        )
    )
    found = behind.toArrow()
    marks.toArrow()
    runs.toArrow()
    committed.unpersist(blocking=True)
    return time.perf_counter() - began, found.num_rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pipelines", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="dgm-bench-window-") as tmp:
        spark = build_session(master=args.master, app_name="dgm-bench-stream-window")
        world = generated.build(Path(tmp) / "world", args.size, args.pipelines, args.partitions)
        print(f"{world.rows:,} fingerprints", flush=True)
        fingerprints, ctx, count, unstamped = captured_rebuild(spark, world)
        times: dict[str, list[float]] = {"pass": [], "window": []}
        for rep in range(args.reps):
            pass_s, pass_behind = timed_pass(fingerprints, ctx, count, unstamped)
            window_s, window_behind = timed_window(fingerprints, ctx, unstamped)
            times["pass"].append(pass_s)
            times["window"].append(window_s)
            print(
                f"rep {rep}: pass {pass_s:.1f} s ({pass_behind:,} behind), window "
                f"{window_s:.1f} s ({window_behind:,} behind)",
                flush=True,
            )
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(
            f"medians: pass {medians['pass']:.1f} s, window {medians['window']:.1f} s "
            f"({medians['pass'] / medians['window']:.1f}x)"
        )
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
