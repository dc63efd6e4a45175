"""Generated fingerprints and collector samples for the analyze and dashboard benchmarks.

The pipelines are tests/support/generated_fingerprints.py's (the differential tests' failure model),
any number of them, with any number of partitions per topic so a run can hold 1,000
partitions: pipeline `<n>` reads `s-<n>` and writes `k-<n>`.

Written as one Parquet file per topic (Spark reads the folder, the DuckDB reference the files
of one pipeline) and the collectors' sample files under `<state>/samples/<kind>/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import samples_dir
from tests.support.generated_fingerprints import Pipeline, pipeline

GRACE_S = 30.0


def config(names: list[str]) -> DgmConfig:
    return DgmConfig(
        analysis=AnalysisSettings(window_s=60, grace_s=GRACE_S, min_records=100),
        pipelines=tuple(
            PipelineConfig(
                name=n,
                source_topics=(f"s-{n}",),
                sink_topics=(f"k-{n}",),
                consumer_group=f"g-{n}",
                declared_semantic="exactly-once" if i % 2 else "at-least-once",
            )
            for i, n in enumerate(names)
        ),
    )


def _sample(kind: str, columns: dict[str, Any], rows: int) -> pa.Table:
    """A sample table of `kind`: the given columns, nulls or zeros/empties for the rest."""
    schema = SCHEMAS[kind]
    data = {}
    for field in schema:
        if field.name in columns:
            data[field.name] = pa.array(columns[field.name], field.type)
        elif field.nullable:
            data[field.name] = pa.nulls(rows, field.type)
        elif pa.types.is_string(field.type):
            data[field.name] = pa.array([""] * rows, field.type)
        elif pa.types.is_boolean(field.type):
            data[field.name] = pa.array([False] * rows, field.type)
        elif pa.types.is_list(field.type):
            data[field.name] = pa.array([[]] * rows, field.type)
        else:
            data[field.name] = pa.array(np.zeros(rows, np.int64)).cast(field.type)
    return pa.table(data, schema=schema)


def write_samples(state: Path, pipelines: list[Pipeline], at: datetime, cycles: int = 10) -> None:
    """offsets of every partition and group_offsets of every source partition at `cycles`
    sample times (the last at `at`, 10 s apart), a rebalance and an epoch bump per pipeline,
    and one open transaction per source topic."""
    times = [at - timedelta(seconds=10 * (cycles - 1 - c)) for c in range(cycles)]
    offsets: dict[str, list[Any]] = {k: [] for k in ("sampled_at", "topic", "partition")}
    offsets |= {"high_watermark": [], "lso": [], "lso_lag": [], "lso_since": []}
    groups: dict[str, list[Any]] = {k: [] for k in ("sampled_at", "group_id", "topic")}
    groups |= {"partition": [], "committed_offset": [], "group_state": [], "high_watermark": []}
    groups |= {"lso": [], "lag_from_hw": [], "lag_from_lso": []}
    for p in pipelines:
        for table in (p.source, p.sink):
            topic = table["topic"][0].as_py()
            ends = pc.value_counts(table["partition"]).to_pylist()
            for end in sorted(ends, key=lambda e: e["values"]):
                for t in times:
                    offsets["sampled_at"].append(t)
                    offsets["topic"].append(topic)
                    offsets["partition"].append(end["values"])
                    offsets["high_watermark"].append(end["counts"])
                    offsets["lso"].append(end["counts"] - (1 if table is p.source else 0))
                    offsets["lso_lag"].append(1 if table is p.source else 0)
                    offsets["lso_since"].append(times[0])
        counts = pc.value_counts(p.source["partition"]).to_pylist()
        source_ends = {c["values"]: c["counts"] for c in counts}
        for row in p.committed.to_pylist():
            end = source_ends.get(row["partition"], 0)
            for t in times:
                groups["sampled_at"].append(t)
                groups["group_id"].append(f"g-{p.name}")
                groups["topic"].append(row["topic"])
                groups["partition"].append(row["partition"])
                groups["committed_offset"].append(row["committed_offset"])
                groups["group_state"].append("Stable")
                groups["high_watermark"].append(end)
                groups["lso"].append(end - 1)
                groups["lag_from_hw"].append(end - row["committed_offset"])
                groups["lag_from_lso"].append(end - 1 - row["committed_offset"])
    events = {
        "sampled_at": [p.cutoff - timedelta(seconds=600) for p in pipelines] * 2,
        "event": ["rebalance"] * len(pipelines) + ["epoch_bump"] * len(pipelines),
        "group_id": [f"g-{p.name}" for p in pipelines] + [None] * len(pipelines),
        "producer_id": [None] * len(pipelines) + list(range(len(pipelines))),
    }
    producers = {
        "sampled_at": [at] * len(pipelines),
        "topic": [f"s-{p.name}" for p in pipelines],
        "partition": [0] * len(pipelines),
        "producer_id": list(range(len(pipelines))),
        "txn_start_offset": [5] * len(pipelines),
        "idle_ms": [1000] * len(pipelines),
    }
    kinds = {
        "offsets": (offsets, len(offsets["topic"])),
        "group_offsets": (groups, len(groups["topic"])),
        "events": (events, len(events["event"])),
        "producers": (producers, len(producers["topic"])),
    }
    for kind, (columns, rows) in kinds.items():
        folder = samples_dir(state) / kind
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(_sample(kind, columns, rows), folder / "0000000000000-000000.parquet")


@dataclass
class World:
    folder: Path  # Parquet fingerprints, one file per topic
    state: Path  # samples under it; publish here
    names: list[str]
    committed: dict[str, pa.Table]
    rows: int
    now: datetime  # cutoff + grace


def build(
    root: Path, rows: int, pipelines: int, partitions: int, seed: int = 11, cycles: int = 10
) -> World:
    """About `rows` fingerprints over `pipelines` pipelines of `partitions` partitions per
    topic (source and sink), written under `root`."""
    folder, state = root / "fingerprints", root / "state"
    folder.mkdir(parents=True, exist_ok=True)
    sends = int(rows / pipelines / 2.02)  # a source row per send and ~1.02 sink rows per send
    made, total = [], 0
    for index in range(pipelines):
        p = pipeline(f"p{index:02d}", sends, partitions, seed + index)
        for table in (p.source, p.sink):
            pq.write_table(table, folder / f"{table['topic'][0].as_py()}.parquet")
            total += table.num_rows
        made.append(p)
    now = made[0].cutoff + timedelta(seconds=GRACE_S)
    write_samples(state, made, now, cycles)
    committed = {p.name: p.committed for p in made}
    for p in made:  # free the tables; what the benchmarks need is on disk
        p.source = p.sink = pa.table({})
    return World(folder, state, [p.name for p in made], committed, total, now)
