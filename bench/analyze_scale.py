"""How long `analyze` + `publish` take on 1M and 10M fingerprints, against the DuckDB reference.

Generates fingerprints with bench/generated.py (pipelines of a source and a sink topic, group
offsets, injected duplicates, gaps, losses and aborted records; one Parquet file per topic),
then, per size and repetition, side by side in one process:

- Spark, per variant: read the Parquet folder, persist it as that variant's job keeps its
  fingerprints (audit/incremental_load's storage level) and count it (the job's "load" stage),
  then `analyze` + `fill_run` + `publish` (the job's "analyze+publish" stage: publish forces
  every table). Variant `head` runs spark_jobs as committed at --baseline-rev (a copy of the
  package under another name) with that revision's settings; `tuned` the working tree's.
- DuckDB reference (tests/support/reference.py) on the same Parquet files: duplicate_copies and
  duplicate_summary of all topics, duplicate_causes and lost of every pipeline.
- DuckDB building every published table (bench/published_scale.py's `build_tables`) from the
  same fingerprint and sample files: the yardstick of a rebuild (loading on both sides).

    python -m bench.analyze_scale [--sizes 1000000,10000000] [--reps 3] [--variants head,tuned]
        [--pipelines 10] [--partitions 50] [--master local[2]] [--keep DIR] [--per-table]
        [--floor]

--floor also times, on each repetition's cached fingerprints, the one-shuffle query of
bench/analyze_cycle.py (the floor of a per-id engine's cycle).

--keep DIR leaves the last published dgm.duckdb of the largest size in DIR (the dashboard
benchmark's input). Current figures: bench/README.md; their history: bench/HISTORY.md,
"Analyze: time against the DuckDB reference" and the sections after it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from bench import analyze_cycle, generated, published_scale
from spark_jobs.schemas import FINGERPRINT
from tests.support import reference

REPO = Path(__file__).resolve().parents[1]
HEAD_PACKAGE = "spark_jobs_head"
# Runtime settings a variant sets (None: the session's default for it).
HEAD_SETTINGS = {"spark.sql.shuffle.partitions": "4"}


def head_package(rev: str, into: Path) -> ModuleType:
    """spark_jobs as committed at `rev`, importable as HEAD_PACKAGE (imports renamed)."""
    package = into / HEAD_PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "spark_jobs/"],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    for name in names:
        if not name.endswith(".py"):
            continue
        text = subprocess.run(
            ["git", "show", f"{rev}:{name}"], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout
        text = text.replace("from spark_jobs", f"from {HEAD_PACKAGE}").replace(
            "import spark_jobs", f"import {HEAD_PACKAGE}"
        )
        target = package / Path(name).relative_to("spark_jobs")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    sys.path.insert(0, str(into))
    # Spark's Python workers import it too: they inherit the JVM's environment, and the JVM
    # starts after this with the driver's.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(into), os.environ.get("PYTHONPATH")) if p
    )
    return importlib.import_module(HEAD_PACKAGE)


def _head_modules() -> tuple[str, str]:
    """The analyze and publish modules of the head revision: modules of spark_jobs itself
    before the audit/analyze split, of its analyze package after it."""
    root = Path(importlib.import_module(HEAD_PACKAGE).__path__[0])
    if (root / "analyze" / "analysis.py").exists():
        return f"{HEAD_PACKAGE}.analyze.analysis", f"{HEAD_PACKAGE}.analyze.publish"
    return f"{HEAD_PACKAGE}.analyze", f"{HEAD_PACKAGE}.publish"


def job_counts(spark: Any, group: str) -> tuple[int, int, int]:
    """(jobs, stages, tasks) Spark ran under job group `group` (skipped stages excluded)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    stages = tasks = 0
    for job in jobs:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None and stage_info.numCompletedTasks > 0:
                stages += 1
                tasks += stage_info.numCompletedTasks
    return len(jobs), stages, tasks


def kept_as_the_job_keeps(root: str, read: DataFrame) -> DataFrame:
    """`read` persisted as the variant's job keeps its fingerprints (incremental_load's
    storage level)."""
    if importlib.util.find_spec(f"{root}.audit.incremental_load") is None:
        kept = read.cache()  # before the job kept its fingerprints (2c48d75)
    else:
        # Until incremental_load named its level (KEPT), it persisted MEMORY_AND_DISK.
        loading = importlib.import_module(f"{root}.audit.incremental_load")
        kept = read.persist(getattr(loading, "KEPT", StorageLevel.MEMORY_AND_DISK))
    return kept


def run_spark(
    spark: Any,
    variant: str,
    world: generated.World,
    state: Path,
    per_table: bool,
    tag: str,
    floor: bool = False,
) -> dict[str, Any]:
    modules = {
        "head": _head_modules() if variant == "head" else ("", ""),
        "tuned": ("spark_jobs.analyze.analysis", "spark_jobs.analyze.publish"),
    }[variant]
    analyze_module = importlib.import_module(modules[0])
    publish_module = importlib.import_module(modules[1])
    settings = HEAD_SETTINGS if variant == "head" else TUNED_SETTINGS
    # Put back what the session had, not Spark's defaults: unset would leave the next
    # variant 200 shuffle partitions instead of the session's.
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    # Since the samples moved to the driver, read_samples takes no session.
    package = analyze_module.__name__.rsplit(".", 1)[0]
    read_samples = importlib.import_module(package + ".samples").read_samples
    takes_spark = "spark" in inspect.signature(read_samples).parameters

    group = f"{tag}-{variant}"
    spark.sparkContext.setJobGroup(group, group)
    began = time.perf_counter()
    read = spark.read.schema(FINGERPRINT).parquet(str(world.folder))
    fingerprints = kept_as_the_job_keeps(package.rsplit(".", 1)[0], read)
    count = fingerprints.count()
    load_s = time.perf_counter() - began
    began = time.perf_counter()
    config = generated.config(world.names)
    samples = read_samples(spark, world.state) if takes_spark else read_samples(world.state)
    # Since the seam was straightened, analyze takes one Fingerprints value.
    given: Any = fingerprints
    if "Fingerprints" in str(inspect.signature(analyze_module.analyze).parameters["fingerprints"]):
        root = package.rsplit(".", 1)[0]
        # The value's module was renamed (fingerprints -> analysis_input).
        for name in ("analysis_input", "fingerprints"):
            if importlib.util.find_spec(f"{root}.{name}") is not None:
                given = importlib.import_module(f"{root}.{name}").Fingerprints(fingerprints)
                break
    # The engine's own step timings (routes, per id, runs and order), where it has them.
    engine = None
    if "engine" in inspect.signature(analyze_module.analyze).parameters:
        engine = importlib.import_module(package + ".engine").Engine()
    extra = {"engine": engine} if engine is not None else {}
    tables = analyze_module.analyze(spark, config, given, samples, world.now, **extra)
    stamp = datetime.now(UTC)  # a fresh run for the dashboard benchmark, not a STALE one
    # fill_run moved from the analysis module to analyze/runs with the layout change.
    runs_name = analyze_module.__name__.rsplit(".", 1)[0] + ".runs"
    fill_run = (
        getattr(analyze_module, "fill_run", None) or importlib.import_module(runs_name).fill_run
    )
    tables["runs"] = fill_run(tables["runs"], tag, stamp, stamp, count)
    per: dict[str, float] = {}
    if per_table:
        arrow = {}
        for name, frame in tables.items():
            mark = time.perf_counter()
            arrow[name] = frame.toArrow() if isinstance(frame, DataFrame) else frame
            per[name] = time.perf_counter() - mark
        tables = arrow
    publish_module.publish(tables, state)
    analyze_s = time.perf_counter() - began
    jobs, stages, tasks = job_counts(spark, group)
    one_shuffle_s = None
    if floor:
        mark = time.perf_counter()
        analyze_cycle.one_shuffle(fingerprints)
        one_shuffle_s = time.perf_counter() - mark
    fingerprints.unpersist(blocking=True)
    for key, value in previous.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
    return {
        "fingerprints": count,
        "load_s": load_s,
        "analyze_publish_s": analyze_s,
        "jobs": jobs,
        "stages": stages,
        "tasks": tasks,
        "per_table_s": per,
        "one_shuffle_s": one_shuffle_s,
        "steps": engine.last if engine is not None else "",
    }


def run_reference(world: generated.World) -> dict[str, float]:
    folder = world.folder
    every = str(folder / "*.parquet")
    timings = {}
    mark = time.perf_counter()
    reference.duplicate_copies(every)
    timings["duplicate_copies"] = time.perf_counter() - mark
    mark = time.perf_counter()
    reference.duplicate_summary(every)
    timings["duplicate_summary"] = time.perf_counter() - mark
    mark = time.perf_counter()
    for name in world.names:
        reference.duplicate_causes(folder / f"s-{name}.parquet", folder / f"k-{name}.parquet")
    timings["duplicate_causes"] = time.perf_counter() - mark
    cutoff = world.now - timedelta(seconds=generated.GRACE_S)
    mark = time.perf_counter()
    for name in world.names:
        reference.lost(
            folder / f"s-{name}.parquet",
            folder / f"k-{name}.parquet",
            world.committed[name],
            cutoff,
        )
    timings["lost"] = time.perf_counter() - mark
    timings["total"] = sum(timings.values())
    return timings


def run_all_tables(world: generated.World, out: Path) -> float:
    """Seconds DuckDB takes to build every published table of `world` from its files
    (bench/published_scale.py, loading included): the rebuild's yardstick."""
    mark = time.perf_counter()
    published_scale.build_tables(world, out)
    return time.perf_counter() - mark


TUNED_SETTINGS: dict[str, str] = {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--variants", default="head,tuned")
    parser.add_argument("--baseline-rev", default="d41262f")
    parser.add_argument("--pipelines", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=50, help="per topic")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", type=Path, help="copy the largest size's dgm.duckdb here")
    parser.add_argument("--per-table", action="store_true", help="time each table's toArrow")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time one shuffle by id with per-partition work (analyze_cycle.one_shuffle)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = args.variants.split(",")

    from spark_jobs.session import build_session

    with tempfile.TemporaryDirectory(prefix="dgm-bench-analyze-") as tmp:
        if "head" in variants:
            head_package(args.baseline_rev, Path(tmp) / "head")
        spark = build_session(master=args.master, app_name="dgm-bench-analyze")
        memory = spark.sparkContext.getConf().get("spark.driver.memory", "1g (default)")
        print(
            f"Spark {spark.version} on {spark.sparkContext.master}, driver memory {memory}",
            flush=True,
        )
        try:
            for size in sizes:
                began = time.perf_counter()
                world = generated.build(
                    Path(tmp) / f"world-{size}", size, args.pipelines, args.partitions
                )
                print(
                    f"\n{world.rows:,} fingerprints ({args.pipelines} pipelines, "
                    f"{2 * args.pipelines * args.partitions} partitions) generated in "
                    f"{time.perf_counter() - began:.1f}s",
                    flush=True,
                )
                results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
                refs: list[dict[str, float]] = []
                builds: list[float] = []
                for rep in range(args.reps):
                    for variant in variants:
                        state = Path(tmp) / f"state-{size}-{variant}"
                        shutil.copytree(world.state, state, dirs_exist_ok=True)
                        r = run_spark(
                            spark,
                            variant,
                            world,
                            state,
                            args.per_table,
                            f"s{size}r{rep}",
                            args.floor,
                        )
                        results[variant].append(r)
                        tables = ", ".join(f"{k} {v:.1f}" for k, v in r["per_table_s"].items())
                        per = f" per table: {tables}" if tables else ""
                        if r["steps"]:
                            per += f"; engine: {r['steps']}"
                        if r["one_shuffle_s"] is not None:
                            per += f"; one shuffle by id {r['one_shuffle_s']:.2f}s"
                        print(
                            f"  rep {rep} {variant}: load {r['load_s']:.1f}s, analyze+publish "
                            f"{r['analyze_publish_s']:.1f}s ({r['jobs']} jobs, {r['stages']} "
                            f"stages, {r['tasks']} tasks){per}",
                            flush=True,
                        )
                        if args.keep and size == sizes[-1] and variant == variants[-1]:
                            args.keep.mkdir(parents=True, exist_ok=True)
                            shutil.copy(state / "dgm.duckdb", args.keep / "dgm.duckdb")
                    refs.append(run_reference(world))
                    builds.append(run_all_tables(world, Path(tmp) / f"duckdb-{size}"))
                    print(
                        "  rep {} reference: {}; every table (published_scale) {:.2f}s".format(
                            rep,
                            ", ".join(f"{k} {v:.2f}s" for k, v in refs[-1].items()),
                            builds[-1],
                        ),
                        flush=True,
                    )
                ref_median = statistics.median(r["total"] for r in refs)
                build_median = statistics.median(builds)
                print(f"  {world.rows:,} fingerprints, medians of {args.reps}:")
                print(f"    reference (DuckDB) {ref_median:.2f}s")
                print(f"    every table (DuckDB, published_scale) {build_median:.2f}s")
                for variant in variants:
                    ap = statistics.median(r["analyze_publish_s"] for r in results[variant])
                    load = statistics.median(r["load_s"] for r in results[variant])
                    print(
                        f"    {variant}: load {load:.1f}s, analyze+publish {ap:.1f}s "
                        f"= {ap / ref_median:.0f}x the reference; load+analyze+publish "
                        f"= {(load + ap) / build_median:.1f}x every table's DuckDB build",
                        flush=True,
                    )
                    if args.floor:
                        floor = statistics.median(r["one_shuffle_s"] for r in results[variant])
                        print(f"    {variant}: one shuffle by id {floor:.2f}s", flush=True)
        finally:
            spark.stop()
    os.system("uptime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
