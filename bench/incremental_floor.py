"""The floor of an incremental cycle: recomputing only the message ids new records touch,
out of 10M fingerprints kept in the Spark application.

The design issue 13 asks for keeps the retained fingerprints in the executors, partitioned
by message id, and per cycle recomputes the rows of the ids the new records touch (their
copies, causes, losses and counts; the counts then adjusted by the difference). This times
the part that grows with the retained fingerprints, on bench/generated.py's data, side by
side in one Spark application:

- `state`: the fingerprints read, partitioned by message id and cached (a rebuild's load);
- `select`: the rows of `--touched` ids picked out of the cached state with a broadcast
  semi-join (a scan of every retained row: the floor of any cycle of this design);
- `recompute`: those rows re-shuffled by id and run through per_id (what the cycle
  recomputes), collected;
- `full`: per_id over the whole state (what each cycle costs without kept state).

    DGM_SPARK_DRIVER_MEMORY=10g python -m bench.incremental_floor [--size 10000000]
        [--touched 10000] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import generated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--touched", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    from pyspark.sql import functions as F

    from spark_jobs.analyze.claims import latest_committed
    from spark_jobs.analyze.context import context, history
    from spark_jobs.analyze.passes import OUTPUT, _in_partitions
    from spark_jobs.analyze.per_id import COLUMNS, per_id_rows
    from spark_jobs.analyze.samples import read_samples
    from spark_jobs.schemas import FINGERPRINT
    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="dgm-bench-incremental-") as tmp:
        world = generated.build(Path(tmp), args.size, 10, 50)
        config = generated.config(world.names)
        spark = build_session(master=args.master, app_name="dgm-bench-incremental")
        parts = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
        print(f"{world.rows:,} fingerprints, {parts} partitions by id, {spark.sparkContext.master}")
        try:
            fingerprints = spark.read.schema(FINGERPRINT).parquet(str(world.folder))
            committed = latest_committed(
                read_samples(world.state)["group_offsets"], config, world.now
            )
            known = history(fingerprints)
            ctx = context(config, known, committed, world.now)
            work = _in_partitions(lambda batch: per_id_rows(batch, ctx))

            began = time.perf_counter()
            state = fingerprints.select(*COLUMNS).repartition(parts, "message_id").cache()
            state.count()
            print(f"state: {time.perf_counter() - began:.1f}s", flush=True)

            fraction = min(1.0, 3 * args.touched / world.rows)
            ids = (
                state.where(F.col("message_id").isNotNull())
                .select("message_id")
                .sample(fraction=fraction, seed=5)
                .distinct()
                .limit(args.touched)
                .toArrow()
            )
            touched = spark.createDataFrame(ids).cache()
            print(f"touched ids: {touched.count():,}", flush=True)
            times: dict[str, list[float]] = {"select": [], "recompute": []}
            for rep in range(args.reps + 1):  # rep 0 warms up
                began = time.perf_counter()
                selected = state.join(F.broadcast(touched), "message_id", "left_semi")
                rows = selected.count()
                took = {"select": time.perf_counter() - began}
                began = time.perf_counter()
                again = selected.repartition(parts, "message_id").mapInArrow(work, OUTPUT)
                out = again.toArrow().num_rows
                took["recompute"] = time.perf_counter() - began
                print(
                    f"rep {rep}: select {took['select']:.2f}s ({rows:,} rows), "
                    f"recompute {took['recompute']:.2f}s ({out:,} output rows)",
                    flush=True,
                )
                if rep:
                    for name, value in took.items():
                        times[name].append(value)
            began = time.perf_counter()
            full = state.mapInArrow(work, OUTPUT).toArrow().num_rows
            print(f"full: {time.perf_counter() - began:.1f}s ({full:,} output rows)")
            for name, found in times.items():
                print(f"{name}: median {statistics.median(found):.2f}s of {len(found)}")
        finally:
            spark.stop()
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
