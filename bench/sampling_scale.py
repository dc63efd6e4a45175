"""What id-hash sampling saves (docs/design.md, "Sampled pipelines"): the fingerprints kept and
the time of an analysis (a rebuild of every table, then publication) at 1 in N message ids,
N = 1, 10, 100, on the same generated fingerprints, side by side in one process.

The fingerprints are bench/generated.py's (duplicates, gaps, losses, aborted records); the
fingerprints a sampled audit would keep are the generated ones its hash keeps
(spark_jobs.sampling.kept), written to Parquet, read back and cached as the job's kept
fingerprints are. Each repetition times every share in turn (shares rotated, so none always
runs first).

    python -m bench.sampling_scale [--rows 10000000] [--shares 1,10,100] [--reps 3]
        [--pipelines 10] [--partitions 50] [--master local[2]]

Figures: bench/README.md; history: bench/HISTORY.md, "Sampling: what keeping 1 in N ids saves".
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import generated
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.analysis import analyze
from spark_jobs.analyze.publish import publish
from spark_jobs.analyze.runs import fill_run
from spark_jobs.analyze.samples import read_samples
from spark_jobs.sampling import kept
from spark_jobs.schemas import FINGERPRINT
from spark_jobs.session import build_session


def sampled_config(world: generated.World, one_in: int) -> Any:
    config = generated.config(world.names)
    analysis = dataclasses.replace(config.analysis, sample_one_in=one_in)
    return dataclasses.replace(config, analysis=analysis)


def write_kept(spark: Any, world: generated.World, one_in: int, into: Path) -> Path:
    """The fingerprints a 1-in-`one_in` audit would have written, as Parquet."""
    config = sampled_config(world, one_in)
    frame = spark.read.schema(FINGERPRINT).parquet(str(world.folder))
    kept(frame, config.topic_one_in()).write.parquet(str(into))
    return into


def one_analysis(
    spark: Any, world: generated.World, one_in: int, folder: Path, out: Path
) -> dict[str, float]:
    began = time.perf_counter()
    fingerprints = spark.read.schema(FINGERPRINT).parquet(str(folder)).cache()
    count = fingerprints.count()
    load_s = time.perf_counter() - began
    began = time.perf_counter()
    config = sampled_config(world, one_in)
    tables = analyze(
        spark, config, Fingerprints(fingerprints, count=count), read_samples(world.state), world.now
    )
    tables["runs"] = fill_run(tables["runs"], "bench", world.now, world.now, 0)
    publish(tables, out)
    analyze_s = time.perf_counter() - began
    fingerprints.unpersist()
    return {"fingerprints": count, "load_s": load_s, "analyze_s": analyze_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--shares", default="1,10,100")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pipelines", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    shares = [int(s) for s in args.shares.split(",")]
    spark = build_session(master=args.master, app_name="dgm-bench-sampling")
    print(
        f"load average {os.getloadavg()[0]:.1f}; Spark {spark.version} on {args.master}", flush=True
    )
    with tempfile.TemporaryDirectory(prefix="dgm-bench-sampling-") as scratch:
        root = Path(scratch)
        began = time.perf_counter()
        world = generated.build(root / "world", args.rows, args.pipelines, args.partitions)
        print(
            f"generated {world.rows:,} fingerprints in {time.perf_counter() - began:.0f}s",
            flush=True,
        )
        folders = {
            n: write_kept(spark, world, n, root / f"kept-{n}") if n > 1 else world.folder
            for n in shares
        }
        results: dict[int, list[dict[str, float]]] = {n: [] for n in shares}
        for rep in range(args.reps):
            order = shares[rep % len(shares) :] + shares[: rep % len(shares)]
            for n in order:
                found = one_analysis(spark, world, n, folders[n], root / f"out-{n}-{rep}")
                results[n].append(found)
                print(
                    f"rep {rep + 1} 1 in {n}: {found['fingerprints']:,} fingerprints, "
                    f"load {found['load_s']:.1f}s, analyze+publish {found['analyze_s']:.1f}s",
                    flush=True,
                )
        base = statistics.median(r["analyze_s"] for r in results[shares[0]])
        for n in shares:
            kept_rows = results[n][0]["fingerprints"]
            median = statistics.median(r["analyze_s"] for r in results[n])
            print(
                f"1 in {n}: {kept_rows:,} fingerprints ({kept_rows / world.rows:.4f} of all), "
                f"analyze+publish median {median:.1f}s ({median / base:.3f} of 1 in {shares[0]})"
            )
    print(f"load average {os.getloadavg()[0]:.1f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
