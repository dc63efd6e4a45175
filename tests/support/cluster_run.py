"""Analyze and publish two generated pipelines on the Spark master given, into OUT, in two
cycles of the incremental engine (a rebuild over the older 70%, then the rest added): run by
test_standalone_cluster.py on a standalone cluster, in its own process (a process holds one
SparkContext). The test then publishes the same data rebuilt in one analysis in local mode
on its session's Spark (`publish_rebuilt`), and the two publications must be equal: the
cluster's incremental cycle is a rebuild's equal, and the cluster's tables local mode's.

    python -m tests.support.cluster_run MASTER OUT    # from the repository root
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.sample_schemas import SCHEMAS
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.analysis import analyze
from spark_jobs.analyze.engine import Engine
from spark_jobs.analyze.publish import publish
from spark_jobs.analyze.runs import fill_run
from spark_jobs.session import build_session
from tests.support.generated_fingerprints import pipeline
from tests.support.strength import by_strength

NAMES = ("a", "b")


def config() -> DgmConfig:
    return DgmConfig(
        analysis=AnalysisSettings(window_s=60, grace_s=30.0, min_records=100),
        pipelines=tuple(
            PipelineConfig(
                name=n,
                source_topics=(f"s-{n}",),
                sink_topics=(f"k-{n}",),
                consumer_group=f"g-{n}",
                declared_semantic="exactly-once",
            )
            for n in NAMES
        ),
    )


def group_offsets(committed: dict[str, pa.Table], at: object) -> pa.Table:
    """One group_offsets sample of each pipeline's committed offsets, taken at `at`."""
    rows = [
        {
            "sampled_at": at,
            "cluster_id": "c",
            "group_id": f"g-{name}",
            "group_state": "Stable",
            **row,
        }
        for name, table in committed.items()
        for row in table.to_pylist()
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMAS["group_offsets"])


@dataclass(frozen=True)
class Generated:
    fingerprints: pa.Table
    now: datetime
    samples: dict[str, pa.Table]


def generated() -> Generated:
    """The same two pipelines on every call (fixed seeds): 5,000 sends each (over 500 copies
    and 90 losses in all), 20,000 with DGM_LONG=1 (read by the runner's process too)."""
    sends = by_strength(5_000, 20_000)
    made = [pipeline(n, sends=sends, partitions=6, seed=3 + i) for i, n in enumerate(NAMES)]
    fingerprints = pa.concat_tables([t for p in made for t in (p.source, p.sink)])
    now = made[0].cutoff + timedelta(seconds=30)
    samples = {"group_offsets": group_offsets({p.name: p.committed for p in made}, now)}
    return Generated(fingerprints, now, samples)


def publish_rebuilt(spark: SparkSession, out: Path) -> None:
    """One analysis over all of the data, published into `out`."""
    data = generated()
    fingerprints = Fingerprints(spark.createDataFrame(data.fingerprints))
    tables = analyze(spark, config(), fingerprints, data.samples, data.now)
    tables["runs"] = fill_run(tables["runs"], "run", data.now, data.now, 0)
    publish(tables, out)


def main(master: str, out: Path) -> None:
    data = generated()
    fingerprints, now, samples = data.fingerprints, data.now, data.samples
    spark = build_session(master=master, app_name="dgm-cluster-test")
    try:
        stamps = pc.cast(fingerprints["timestamp"], pa.int64())
        older = pc.less(stamps, pc.quantile(stamps, 0.7)[0])
        first = spark.createDataFrame(fingerprints.filter(older)).cache()
        added = spark.createDataFrame(fingerprints.filter(pc.invert(older))).cache()
        engine = Engine()
        early = now - timedelta(minutes=20)
        analyze(spark, config(), Fingerprints(first), samples, early, engine)
        frame = first.unionByName(added)
        grown = Fingerprints(frame, before=first, added=added)
        tables = analyze(spark, config(), grown, samples, now, engine)
        print(f"second cycle: {engine.last}", flush=True)
        tables["runs"] = fill_run(tables["runs"], "run", now, now, 0)
        publish(tables, out)
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()  # type: ignore[union-attr]
        print(f"executors+driver {executors}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
