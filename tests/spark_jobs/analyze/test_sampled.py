"""Id-hash sampling (docs/design.md, "Sampled pipelines") on generated fingerprints with
duplicates, losses, aborted reads and sequence gaps: a sampled analysis's duplicate and lost
rows and its counts are exactly an unsampled analysis's restricted to the kept ids (less the
sequence gaps a sample cannot see), and the whole pipeline's rates lie in the published
intervals, at 1 in 10 and 1 in 100."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from dgm.config.document import DgmConfig
from dgm.contracts.vocabulary import LossCause
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.analysis import analyze
from spark_jobs.sampling import kept
from tests.support import engine_run
from tests.support.cluster_run import config as two_pipelines
from tests.support.cluster_run import group_offsets
from tests.support.generated_fingerprints import pipeline
from tests.support.strength import by_strength

GAP = LossCause.SEQUENCE_GAP.value
COUNTED = ("records_checked", "duplicate_copies", "aborted_reads", "distinct_ids", "sink_records")


def _config(one_in: int) -> DgmConfig:
    """Pipelines a and b of the cluster test, every pipeline sampled 1 in `one_in`."""
    base = two_pipelines()
    analysis = dataclasses.replace(base.analysis, sample_one_in=one_in, min_records=1)
    return dataclasses.replace(base, analysis=analysis)


def _rows(table: Any) -> list[dict[str, Any]]:
    """A published table's rows, whichever form analyze gives it in."""
    if isinstance(table, DataFrame):
        table = table.toArrow()
    return table.to_pylist() if isinstance(table, pa.Table) else list(table)


def _analysis(spark: Any, fingerprints: pa.Table, one_in: int, made: Any) -> dict[str, Any]:
    samples = {"group_offsets": group_offsets({made.name: made.committed}, made.now)}
    frame = spark.createDataFrame(fingerprints)
    tables = analyze(spark, _config(one_in), Fingerprints(frame), samples, made.now)
    lost = _rows(tables["lost"])
    return {
        "verdict": next(v for v in _rows(tables["verdicts"]) if v["pipeline"] == made.name),
        "duplicates": sorted(map(repr, _rows(tables["duplicates"]))),
        "lost": sorted(repr(r) for r in lost if r["cause"] != GAP),
        "gaps": sum(r["cause"] == GAP for r in lost),
    }


@dataclasses.dataclass
class Made:
    name: str
    fingerprints: pa.Table
    committed: pa.Table
    now: Any


def _made(seed: int, sends: int) -> Made:
    p = pipeline("a", sends=sends, partitions=4, seed=seed)
    return Made(
        "a", pa.concat_tables([p.source, p.sink]), p.committed, p.cutoff + timedelta(seconds=30)
    )


@pytest.fixture(scope="module")
def exact(spark: Any) -> tuple[Made, dict[str, Any]]:
    made = _made(seed=11, sends=30_000)
    return made, _analysis(spark, made.fingerprints, 1, made)


@pytest.mark.parametrize("one_in", [10, 100])
def test_a_sample_is_the_exact_analysis_of_its_kept_ids(
    spark: Any, exact: tuple[Made, dict[str, Any]], one_in: int
) -> None:
    made, whole = exact
    sampled = _analysis(spark, made.fingerprints, one_in, made)
    # The unsampled analysis of the kept ids alone: the same rows, record by record.
    topics = {"s-a": one_in, "k-a": one_in}
    restricted = kept(spark.createDataFrame(made.fingerprints), topics).toArrow()
    alone = _analysis(spark, restricted, 1, made)
    assert sampled["duplicates"] == alone["duplicates"] and sampled["duplicates"]
    assert sampled["lost"] == alone["lost"]
    assert sampled["gaps"] == 0  # holes of a sample are no sequence gaps
    verdict, unsampled = sampled["verdict"], alone["verdict"]
    assert {c: verdict[c] for c in COUNTED} == {c: unsampled[c] for c in COUNTED}
    assert verdict["lost"] == len(sampled["lost"])  # a row per lost id, no sequence gap
    kept_share = verdict["records_checked"] / whole["verdict"]["records_checked"]
    assert 0.5 / one_in < kept_share < 2 / one_in
    # The whole pipeline's rates (sequence gaps aside: a sample cannot see them) lie in the
    # published 95% intervals.
    assert verdict["sample_one_in"] == one_in
    all_ids = whole["verdict"]
    duplicate_rate = all_ids["duplicate_copies"] / all_ids["distinct_ids"]
    loss_rate = len(whole["lost"]) / all_ids["records_checked"]  # sequence gaps aside
    assert verdict["duplicate_rate_low"] <= duplicate_rate <= verdict["duplicate_rate_high"]
    assert verdict["loss_rate_low"] <= loss_rate <= verdict["loss_rate_high"]
    assert all_ids["sample_one_in"] == 1
    assert all_ids["loss_rate_low"] == all_ids["loss_rate"] == all_ids["loss_rate_high"]


@engine_run.spark_examples(by_strength(3, 12))
@given(seed=st.integers(0, 2**16), one_in=st.integers(2, 40))
def test_sampled_counts_equal_the_exact_counts_of_the_kept_ids(
    spark: Any, seed: int, one_in: int
) -> None:
    made = _made(seed, sends=2_000)
    sampled = _analysis(spark, made.fingerprints, one_in, made)
    restricted = kept(spark.createDataFrame(made.fingerprints), {"s-a": one_in, "k-a": one_in})
    alone = _analysis(spark, restricted.toArrow(), 1, made)
    assert sampled["duplicates"] == alone["duplicates"]
    assert sampled["lost"] == alone["lost"]
    for count in COUNTED:
        assert sampled["verdict"][count] == alone["verdict"][count], count
