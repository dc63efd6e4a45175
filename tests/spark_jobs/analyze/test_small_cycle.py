"""The driver's versions of a cycle's steps (small_cycle.py, routes_in, cycle_streams' *_in)
give what the Spark passes give over the same generated fingerprints: unstamped sinks
(dgm-src missing), aborted and unidentified records, filtered records, and external rows
that repeat. The whole driver path is held to a rebuild and the DuckDB reference cycle by
cycle in test_incremental.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_jobs.analysis_input import conformed
from spark_jobs.analyze import counts as tally
from spark_jobs.analyze import small_cycle as small
from spark_jobs.analyze.context import context, routes, routes_in
from spark_jobs.analyze.cycle_streams import (
    cycle_rows,
    cycle_rows_in,
    unstamped_sinks_in,
)
from spark_jobs.analyze.lineage import unstamped_among, unstamped_sinks
from spark_jobs.analyze.output import SCHEMA as OUTPUT
from spark_jobs.analyze.passes import by_id
from tests.support import engine_run
from tests.support.generated_fingerprints import pipeline as generated_pipeline

pytestmark = pytest.mark.spark


def _fingerprints() -> pa.Table:
    """A stamped pipeline, and one whose sink lacks dgm-src (the id join's), with a few
    records aborted and a few without an id."""
    rng = np.random.default_rng(11)
    a = generated_pipeline("a", sends=600, partitions=3, seed=5, topics=("s", "k"))
    b = generated_pipeline("b", sends=400, partitions=2, seed=6, topics=("s2", "k2"))
    unstamped = b.sink
    for name in ("src_topic", "src_partition", "src_offset", "lineage"):
        at = unstamped.schema.get_field_index(name)
        unstamped = unstamped.set_column(at, name, pa.nulls(len(unstamped), unstamped[name].type))
    whole = pa.concat_tables([a.source, a.sink, b.source, unstamped])
    draw = rng.random(whole.num_rows)
    committed = pc.and_(whole["committed"], pa.array(draw >= 0.03))
    ids = pc.if_else(pa.array(draw < 0.97), whole["message_id"], pa.scalar(None, pa.string()))
    whole = whole.set_column(whole.schema.get_field_index("committed"), "committed", committed)
    return conformed(
        whole.set_column(whole.schema.get_field_index("message_id"), "message_id", ids)
    )


def _ctx(rows: pa.Table) -> Any:
    config = engine_run.config(
        pipelines=(
            engine_run.pipeline("a", ("s",), ("k",)),
            engine_run.pipeline("b", ("s2",), ("k2",)),
        )
    )
    committed = {("a", "s", p): 200 for p in range(3)} | {("b", "s2", p): 150 for p in range(2)}
    now = pc.max(rows["timestamp"]).as_py()
    return context(config, routes_in(rows).history(), committed, now)


def _records(rows: pa.Table) -> pa.Table:
    return rows.filter(pc.is_in(rows["kind"], pa.array(tally.RECORD_KINDS)))


def _counted(rows: pa.Table) -> pd.DataFrame:
    found = tally.summed(tally.count_rows(rows))
    return found.sort_values(list(tally.KEYS)).reset_index(drop=True)


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)


def test_driver_steps_equal_the_spark_passes(spark: Any) -> None:
    rows = _fingerprints()
    frame = spark.createDataFrame(rows)
    ctx = _ctx(rows)
    assert routes_in(rows) == routes(frame)
    assert routes_in(rows.slice(0, 0)) == routes(frame.limit(0))
    ours, theirs = small.id_rows(rows, ctx), by_id(frame, ctx).toArrow().cast(OUTPUT)
    # Record rows are each id's; count rows are partial per Spark partition, summed.
    assert _sorted(_records(ours)) == _sorted(_records(theirs))
    assert _records(ours).num_rows > 50
    assert _counted(ours).equals(_counted(theirs))
    assert unstamped_sinks_in(rows, ctx) == unstamped_sinks(frame, ctx) == {"k2"}
    # The rebuild takes them from its routes' aggregate instead of a query of its own.
    assert unstamped_among(ctx, routes(frame).unstamped) == {"k2"}
    kept, added = rows.slice(0, 1500), rows.slice(1500)
    mine = cycle_rows_in(kept, added, ctx)
    spark_rows = cycle_rows(spark.createDataFrame(kept), spark.createDataFrame(added), ctx)
    assert _sorted(mine) == _sorted(spark_rows.cast(mine.schema))


def test_minus_is_except_all(spark: Any) -> None:
    rows = _fingerprints().slice(0, 300)
    # List columns that differ only by null, empty and their items must stay apart.
    kinds = [None, [], ["p"], ["p", "q"], [""]]
    marks = pa.array([kinds[i % len(kinds)] for i in range(rows.num_rows)], pa.list_(pa.string()))
    rows = rows.set_column(rows.schema.get_field_index("filtered_by"), "filtered_by", marks)
    repeated = pa.concat_tables([rows, rows.slice(0, 40), rows.slice(0, 10)])
    fewer = pa.concat_tables([rows.slice(20), rows.slice(0, 5)])
    one = pa.concat_tables([rows.slice(0, 1)] * len(kinds))  # equal but for filtered_by
    one = one.set_column(
        one.schema.get_field_index("filtered_by"), "filtered_by", pa.array(kinds, marks.type)
    )
    lists = (one, one.take([1, 4]))
    for a, b in ((repeated, fewer), (fewer, repeated), (rows, rows.slice(0, 0)), lists):
        expected = spark.createDataFrame(a).exceptAll(spark.createDataFrame(b)).toArrow()
        found = small.minus(a, b)
        assert _sorted(found) == _sorted(conformed(expected))
    assert small.minus(repeated, fewer).num_rows == repeated.num_rows - fewer.num_rows
    assert small.minus(*lists)["filtered_by"].to_pylist() == [None, ["p"], ["p", "q"]]
