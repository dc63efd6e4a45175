"""The collectors' samples as Spark DataFrames, one per sample kind.

Files live in `<state_dir>/samples/<kind>/` (dgm.samples), listed by the store: temp files and
files a compacted file covers are never read. The Spark schema of a kind is the
collectors' Arrow schema converted, so a kind without files still has its columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dgm import published as tables
from dgm.sample_schemas import SCHEMAS
from dgm.samples import SampleStore
from spark_jobs.analyze.frames import conform, latest_sample
from spark_jobs.schemas import spark_schema

KINDS: tuple[str, ...] = tuple(SCHEMAS)


def sample_schema(kind: str) -> StructType:
    """The Spark schema of sample `kind` (dgm.sample_schemas converted)."""
    if kind not in SCHEMAS:
        raise ValueError(f"unknown sample kind {kind!r} (known: {', '.join(SCHEMAS)})")
    return spark_schema(SCHEMAS[kind])


def empty_samples(spark: SparkSession, kind: str) -> DataFrame:
    """A DataFrame of sample `kind` without rows."""
    return spark.createDataFrame([], sample_schema(kind))


def read_kind(spark: SparkSession, state_dir: Path, kind: str) -> DataFrame:
    """Every sample of `kind` under `state_dir`; empty (with the kind's columns) without files."""
    schema = sample_schema(kind)
    # The files no compacted file covers (dgm.samples), named one by one: the folder would
    # read a compacted file's rows twice while the originals it covers linger.
    files = SampleStore(Path(state_dir)).readable_files(kind)
    if not files:
        return empty_samples(spark, kind)
    return spark.read.schema(schema).parquet(*(str(p) for p in files))


def read_samples(spark: SparkSession, state_dir: Path) -> dict[str, DataFrame]:
    """Sample kind -> DataFrame, for every kind dgm.sample_schemas declares (what `analyze`
    takes as its `samples`)."""
    return {kind: read_kind(spark, state_dir, kind) for kind in KINDS}


def sample_tables(samples: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
    """partition_offsets, group_lag and transactions (open ones at the last producers sample)."""
    producers = latest_sample(samples["producers"]).where(F.col("txn_start_offset").isNotNull())
    return {
        tables.PARTITION_OFFSETS.name: conform(samples["offsets"], tables.PARTITION_OFFSETS),
        tables.GROUP_LAG.name: conform(samples["group_offsets"], tables.GROUP_LAG),
        tables.TRANSACTIONS.name: conform(
            producers.withColumn("age_ms", F.col("idle_ms")), tables.TRANSACTIONS
        ),
    }
