"""The engine's tables for one pipeline `p` (source topic `s`, sink `sink`), given the
fingerprints and the group's committed offsets directly: what the differential and unit
tests compare with the DuckDB reference and with values worked out by hand."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, settings

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.external_sinks import ExternalSink
from dgm.config.pipelines import PipelineConfig
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.engine import Engine
from spark_jobs.schemas import FINGERPRINT

FAR = datetime(2100, 1, 1, tzinfo=UTC)  # a `now` whose cutoff lies after every record
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def pipeline(
    name: str = "p",
    sources: tuple[str, ...] = ("s",),
    sinks: tuple[str, ...] = ("k",),
    external: bool = False,
) -> PipelineConfig:
    return PipelineConfig(
        name=name,
        source_topics=sources,
        sink_topics=sinks,
        consumer_group="g",
        declared_semantic="exactly-once",
        external_sink=ExternalSink(Path("t.db"), "tbl", "id") if external else None,
    )


def config(
    sink: str = "k",
    external: bool = False,
    sources: tuple[str, ...] = ("s",),
    pipelines: tuple[PipelineConfig, ...] = (),
) -> DgmConfig:
    """One pipeline p (`sources` into `sink`, or into an external table) unless `pipelines`."""
    settings = AnalysisSettings(window_s=60, grace_s=0.0, min_records=1)
    chosen = pipelines or (pipeline("p", sources, () if external else (sink,), external),)
    return DgmConfig(analysis=settings, pipelines=chosen)


EXTERNAL = "external:p:tbl"  # the topic an external sink's fingerprints carry


@dataclass
class Tables:
    duplicates: list[dict[str, Any]]
    lost: list[dict[str, Any]]
    topic_windows: list[dict[str, Any]]
    partition_windows: list[dict[str, Any]]
    counts: list[dict[str, Any]]  # counts.pipeline_counts
    out_of_order: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> list[dict[str, Any]]:
        """The cumulative topic_windows rows (duplicate_summary's columns)."""
        return [
            {k: v for k, v in r.items() if k != "window_start"}
            for r in self.topic_windows
            if r["window_start"] is None
        ]

    def total(self, count: str) -> int:
        return sum(r[count] or 0 for r in self.counts if not r["total"])

    def lost_per_window(self) -> dict[datetime, int]:
        found: dict[datetime, int] = {}
        for r in self.counts:
            if not r["total"] and r["window_us"] is not None and r["lost"]:
                at = EPOCH + timedelta(microseconds=r["window_us"])
                found[at] = found.get(at, 0) + r["lost"]
        return found


def run(
    spark: Any,
    fingerprints: pa.Table | list[tuple[Any, ...]] | Any,
    dgm_config: DgmConfig | None = None,
    committed: dict[tuple[Any, ...], int] | None = None,
    now: datetime = FAR,
) -> Tables:
    """The engine over `fingerprints` (Arrow, FINGERPRINT tuples or a DataFrame); `committed`
    maps a source partition (topic, n) of pipeline p, or (pipeline, topic, n), to the group's
    committed offset."""
    frame: Any = fingerprints
    if isinstance(fingerprints, pa.Table):
        frame = spark.createDataFrame(fingerprints)
    elif isinstance(fingerprints, list):
        # Tuples without the trailing filter columns: no pipeline filtered the record.
        width = len(FINGERPRINT.fields)
        padded = [(*r, *(None,) * (width - len(r))) for r in fingerprints]
        frame = spark.createDataFrame(padded, FINGERPRINT)
    dgm_config = dgm_config or config()
    claims = {(k if len(k) == 3 else ("p", *k)): o for k, o in (committed or {}).items()}
    return tables_of(Engine().cycle(dgm_config, Fingerprints(frame), claims, now))


def tables_of(result: tuple[dict[str, pa.Table], pa.Table]) -> Tables:
    """Tables of what Engine.cycle returns (its tables, its pipeline counts)."""
    tables, counts = result
    rows = {name: t.to_pylist() for name, t in tables.items()}
    return Tables(
        rows["duplicates"],
        rows["lost"],
        rows["topic_windows"],
        rows["partition_windows"],
        counts.to_pylist(),
        rows["out_of_order"],
    )


def of_topics(table: pa.Table, *topics: str) -> pa.Table:
    return table.filter(pc.is_in(table["topic"], pa.array(topics, pa.string())))


@contextmanager
def shuffle_partitions(spark: Any, count: int) -> Iterator[None]:
    """The session's shuffle partitions set to `count` for a while: tiny sets gain nothing
    from parallel shuffles and each task costs; results must not depend on it anyway."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(count))
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def spark_examples(count: int) -> settings:
    """Hypothesis settings for a property run against the session's Spark: `count` examples,
    no deadline (a Spark job's time varies with the machine's load), and the fixtures shared
    across examples (the session's Spark, one shuffle partition) allowed."""
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )
