"""Where a demo-sized analysis cycle's time goes, and whether a Spark setting changes it.

Reads the fingerprints, samples and config of a `dgm demo` state directory (stop the demo
first, or copy the folder), then for each variant starts its own Spark application in a
child process (static settings need a fresh JVM) and runs `analyze` + `publish` (into a
temp dir) `--reps` times on the same cached fingerprints, as `dgm analyze` does each cycle.
Per repetition it prints `analyze()` (`plan_s`: since the per-id engine, the
fingerprint-wide work runs here), `publish` (`exec_s`: the per-table frames, written), the
driver JVM's CPU seconds over the latter (from /proc) and the executors' CPU seconds from
Spark's REST API, so the driver's share (planning, code generation, closure cleaning) shows.
Repetition 0 warms up and is left out of the medians.

Each repetition also times two single queries on the same cached fingerprints, the floor a
cycle made of a few queries would start from: all fingerprints to Arrow (`collect_s`), and
one shuffle by (topic, message_id) with the copies counted inside each partition through
`mapInArrow` (`one_shuffle_s`, the shape a per-id engine would use).

    python -m bench.analyze_cycle --state-dir /tmp/demo1 [--reps 4] [--variants base,aqe_off]

Current figures: bench/README.md; their history: bench/HISTORY.md, "A demo cycle's analysis:
where the time goes".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parents[1]
MEASURES = ("plan_s", "exec_s", "jvm_cpu_s", "executor_cpu_s", "collect_s", "one_shuffle_s")

# name -> Spark settings set before the session starts.
VARIANTS: dict[str, dict[str, str]] = {
    "base": {},
    "codegen_cache_5000": {"spark.sql.codegen.cache.maxEntries": "5000"},
    "whole_stage_off": {"spark.sql.codegen.wholeStage": "false"},
    "interpreted": {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    },
    "aqe_off": {"spark.sql.adaptive.enabled": "false"},
    "shuffle_partitions_1": {"spark.sql.shuffle.partitions": "1"},
    "plan_string_2000": {"spark.sql.maxPlanStringLength": "2000"},
    "hash_joins": {"spark.sql.join.preferSortMergeJoin": "false"},
    "broadcast_100mb": {"spark.sql.autoBroadcastJoinThreshold": str(100 * 1024 * 1024)},
}


def _jvm_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _executor_cpu_s(spark: Any) -> float:
    context = spark.sparkContext
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/stages"
    with urllib.request.urlopen(url) as answer:
        stages: list[dict[str, int]] = json.load(answer)
    return sum(stage.get("executorCpuTime", 0) for stage in stages) / 1e9


def one_shuffle(fingerprints: Any) -> int:
    """One query: a shuffle by (topic, message_id), the copies counted per partition."""

    # Nested, so cloudpickle ships it by value: workers cannot import bench/ modules.
    def ids_with_copies(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = list(batches)
        if not received:
            return
        rows = pa.Table.from_batches(received)
        rows = rows.filter(pc.is_valid(rows["message_id"]))
        counted = rows.group_by(["topic", "message_id"]).aggregate([("offset", "count")])
        yield from counted.filter(pc.greater(counted["offset_count"], 1)).to_batches()

    keyed = fingerprints.select("topic", "message_id", "offset")
    keyed = keyed.repartition("topic", "message_id")
    schema = "topic string, message_id string, offset_count bigint"
    return int(keyed.mapInArrow(ids_with_copies, schema).toArrow().num_rows)


def child(variant: str, state_dir: Path, reps: int) -> None:
    from pyspark.sql import SparkSession

    for key, value in VARIANTS[variant].items():
        SparkSession.builder.config(key, value)  # the builder is shared: build_session sees it

    from dgm.config.loader import load_config
    from spark_jobs.analysis_input import Fingerprints
    from spark_jobs.analyze.analysis import analyze
    from spark_jobs.analyze.publish import publish
    from spark_jobs.analyze.samples import read_samples
    from spark_jobs.audit.store import FingerprintStore
    from spark_jobs.session import build_session

    config = load_config(state_dir / "dgm.toml")
    spark = build_session(app_name=f"bench-{variant}")
    spark.sparkContext.setLogLevel("ERROR")
    gateway: Any = spark._jvm
    jvm = int(gateway.java.lang.ProcessHandle.current().pid())  # this session's JVM, no other
    fingerprints = FingerprintStore(state_dir).load(spark).cache()
    count = fingerprints.count()
    loaded = Fingerprints(fingerprints)
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as out:
        for rep in range(reps + 1):
            began = time.perf_counter()
            tables = analyze(spark, config, loaded, read_samples(state_dir), now)
            planned = time.perf_counter()
            jvm_before, executors_before = _jvm_cpu_s(jvm), _executor_cpu_s(spark)
            publish(tables, Path(out))
            done = time.perf_counter()
            jvm_after, executors_after = _jvm_cpu_s(jvm), _executor_cpu_s(spark)
            fingerprints.toArrow()
            collected = time.perf_counter()
            one_shuffle(fingerprints)
            shuffled = time.perf_counter()
            row = {
                "variant": variant,
                "rep": rep,
                "fingerprints": count,
                "plan_s": round(planned - began, 2),
                "exec_s": round(done - planned, 2),
                "jvm_cpu_s": round(jvm_after - jvm_before, 2),
                "executor_cpu_s": round(executors_after - executors_before, 2),
                "collect_s": round(collected - done, 2),
                "one_shuffle_s": round(shuffled - collected, 2),
            }
            print(json.dumps(row), flush=True)
            del tables
    spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--variants", default="base")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.state_dir, args.reps)
        return 0
    names = args.variants.split(",")
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()}", flush=True)
    medians = {}
    for name in names:
        command = [sys.executable, "-m", "bench.analyze_cycle", "--state-dir", str(args.state_dir)]
        command += ["--reps", str(args.reps), "--child", name]
        rows = []
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO) as process:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("{"):
                    rows.append(json.loads(line))
                    print(line.rstrip(), flush=True)
        if process.returncode != 0 or len(rows) < 2:
            print(f"{name}: the child failed (exit {process.returncode})", file=sys.stderr)
            return 1
        warm = rows[1:]
        medians[name] = {key: statistics.median(row[key] for row in warm) for key in MEASURES}
    print(f"\nmedians of {args.reps} (after a warm-up), {rows[0]['fingerprints']} fingerprints:")
    for name, values in medians.items():
        print(f"  {name}: " + ", ".join(f"{key} {value:.2f}" for key, value in values.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
