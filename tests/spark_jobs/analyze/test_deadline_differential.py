"""A deadline claim's lost ids, late records and checked records from the engine equal the
DuckDB reference's (tests/reference.py DEADLINE) on the same fingerprints and `now`: on small
property-based sets (whose source records pipeline p's `expected` predicate may have filtered
or left undecided: a filtered record is never lost nor late), and on a generated pipeline
judged over cycles by one incremental engine while its records age past max_delay and late
copies of lost records arrive."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.contracts.vocabulary import LossCause
from spark_jobs.analyze.engine import Engine
from spark_jobs.fingerprints import Fingerprints
from tests import reference
from tests.generated_fingerprints import pipeline as generated_pipeline
from tests.spark_jobs.analyze import engine_run
from tests.spark_jobs.analyze.test_loss_differential import (
    SOURCE,
    T0,
    assert_same,
    lost_per_window,
    small_tables,
)


def deadline_config(
    max_delay: str, name: str = "p", topics: tuple[str, str] = ("s", "k")
) -> DgmConfig:
    p = PipelineConfig(
        name=name,
        source_topics=(topics[0],),
        sink_topics=(topics[1],),
        declared_semantic="exactly-once",
        claim="deadline",
        max_delay=max_delay,
    )
    return DgmConfig(
        analysis=AnalysisSettings(window_s=60, grace_s=0.0, min_records=1), pipelines=(p,)
    )


def split(theirs: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(lost, late) rows of reference.deadline."""
    return (
        theirs.filter(pc.equal(theirs["kind"], "lost")),
        theirs.filter(pc.equal(theirs["kind"], "late")),
    )


def late_per_window(tables: engine_run.Tables) -> dict[datetime, int]:
    found: dict[datetime, int] = {}
    for r in tables.counts:
        if not r["total"] and r["window_us"] is not None and r["late_records"]:
            at = engine_run.EPOCH + timedelta(microseconds=r["window_us"])
            found[at] = found.get(at, 0) + r["late_records"]
    return found


def assert_agree(
    tables: engine_run.Tables,
    source: pa.Table,
    sink: pa.Table,
    now: datetime,
    delay: timedelta,
    pipeline: str = "p",
) -> tuple[int, int]:
    """(lost, late) after checking every count against the reference; `pipeline` names the
    pipeline whose filtered records (filtered_by) the reference does not check."""
    lost, late = split(reference.deadline(source, sink, now, delay, pipeline))
    gaps = reference.lost(source, sink, pa.table({"topic": pa.array([], pa.string()),
                                                  "partition": pa.array([], pa.int32()),
                                                  "committed_offset": pa.array([], pa.int64())}),
                          now, pipeline=pipeline)  # fmt: skip
    ours = [r for r in tables.lost if r["cause"] == LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY]
    assert_same(ours, lost.drop_columns(["kind"]))
    assert_same([r for r in tables.lost if r not in ours], gaps)
    assert tables.lost_per_window() == lost_per_window(
        pa.concat_tables([lost.drop_columns(["kind"]), gaps], promote_options="permissive")
    )
    assert tables.total("late_records") == late.num_rows
    assert late_per_window(tables) == lost_per_window(late)
    checked = reference.deadline_checked(source, sink, now, delay, pipeline)
    assert tables.total("records_checked") == checked
    filtered = (tables.total("filtered"), tables.total("filter_undecided"))
    assert filtered == reference.filtered(source, pipeline)
    return lost.num_rows, late.num_rows


# (second, id, src, committed) of a sink copy: later seconds than the source's, so copies are
# timely, late or missing against a max_delay of 1 to 4 seconds.
SINK = st.tuples(
    st.integers(0, 12),
    st.sampled_from([None, "i0", "i1", "i2", "i3", "i4", "x"]),
    st.none(),
    st.sampled_from([True, True, False]),
)


@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@engine_run.spark_examples(20)
@given(
    sources=st.lists(SOURCE, max_size=20),
    sinks=st.lists(SINK, max_size=15),
    now_second=st.integers(0, 14),
    delay_s=st.integers(1, 4),
    held_from=st.tuples(st.just(0), st.just(0), st.sampled_from([0, 0, 3])),
)
def test_small_sets_agree(
    spark: Any,
    sources: list[tuple[Any, ...]],
    sinks: list[tuple[Any, ...]],
    now_second: int,
    delay_s: int,
    held_from: tuple[int, int, int],
) -> None:
    source, sink, _ = small_tables(sources, sinks, {}, held_from)
    now, delay = T0 + timedelta(seconds=now_second), timedelta(seconds=delay_s)
    with engine_run.shuffle_partitions(spark, 1):
        tables = engine_run.run(
            spark, pa.concat_tables([source, sink]), deadline_config(f"{delay_s}s"), {}, now
        )
    assert_agree(tables, source, sink, now, delay)


def late_copies(
    generated: Any, first_s: int, last_s: int, count: int, delay: timedelta
) -> tuple[pa.Table, pa.Table]:
    """(the sink without `count` single copies of source records timestamped in [first_s,
    last_s) seconds after T0, those copies again at the sink's end timestamped max_delay + 5 s
    after their source record)."""
    sink = generated.sink
    ids = pc.value_counts(sink.filter(sink["committed"])["message_id"])
    single = {v["values"] for v in ids.to_pylist() if v["counts"] == 1 and v["values"] is not None}
    source = generated.source
    stamps = pc.cast(source["timestamp"], pa.int64()).to_numpy() / 1e6 - T0.timestamp()
    chosen = []
    for row, at in zip(source.to_pylist(), stamps, strict=True):
        if first_s <= at < last_s and row["committed"] and row["message_id"] in single:
            chosen.append(row)
            single.discard(row["message_id"])
        if len(chosen) == count:
            break
    moved = {r["message_id"] for r in chosen}
    kept = sink.filter(pc.invert(pc.is_in(sink["message_id"], pa.array(sorted(moved)))))
    end = pc.max(sink["offset"]).as_py() + 1
    copies = [
        r | {"topic": sink["topic"][0].as_py(), "partition": 0, "offset": end + n,
             "timestamp": r["timestamp"] + delay + timedelta(seconds=5), "lineage": None,
             "src_topic": None, "src_partition": None, "src_offset": None}
        for n, r in enumerate(chosen)
    ]  # fmt: skip
    return kept, pa.Table.from_pylist(copies, schema=sink.schema)


def test_cycles_of_a_generated_pipeline_agree(spark: Any) -> None:
    """Cycle 1 judges the first half of the records (the rest younger than max_delay: pending),
    with 20 records lost whose copies arrive late in cycle 2; cycle 2 judges everything but
    the last seconds, the 20 as late records, never lost."""
    delay = timedelta(seconds=10)
    generated = generated_pipeline("d", sends=3_000, partitions=3, seed=5, topics=("s", "k"))
    sink, late = late_copies(generated, 5, 15, 20, delay)
    config = deadline_config("10s")
    engine = Engine()
    first_now = T0 + timedelta(seconds=30)
    middle = pc.less(generated.source["timestamp"], pa.scalar(first_now))
    source_1 = generated.source.filter(middle)
    sink_1 = sink.filter(pc.less(sink["timestamp"], pa.scalar(first_now)))
    whole_1 = pa.concat_tables([source_1, sink_1])
    frame_1 = spark.createDataFrame(whole_1)

    ours_1 = engine_run.tables_of(engine.cycle(config, Fingerprints(frame_1), {}, first_now))
    _, late_1 = assert_agree(ours_1, source_1, sink_1, first_now, delay)
    lost_ids = {r["message_id"] for r in ours_1.lost}
    assert set(late["message_id"].to_pylist()) <= lost_ids and late_1 == 0
    pending = source_1.num_rows - ours_1.total("records_checked")
    assert pending > 400, pending  # the records of the last max_delay are not judged

    second_now = T0 + timedelta(seconds=55)
    whole_2 = pa.concat_tables([generated.source, sink, late])
    added = spark.createDataFrame(
        pa.concat_tables(
            [
                generated.source.filter(pc.invert(middle)),
                sink.filter(pc.greater_equal(sink["timestamp"], pa.scalar(first_now))),
                late,
            ]
        )
    )
    frame_2 = spark.createDataFrame(whole_2)
    fingerprints = Fingerprints(frame_2, before=frame_1, added=added)
    ours_2 = engine_run.tables_of(engine.cycle(config, fingerprints, {}, second_now))
    assert "touched" in engine.last, engine.last
    sink_2 = pa.concat_tables([sink, late])
    lost_2, late_2 = assert_agree(ours_2, generated.source, sink_2, second_now, delay)
    assert late_2 == 20 and lost_2 > 5
    assert not {r["message_id"] for r in ours_2.lost} & set(late["message_id"].to_pylist())
    rebuilt = engine_run.tables_of(Engine().cycle(config, Fingerprints(frame_2), {}, second_now))
    assert sorted(map(str, ours_2.counts)) == sorted(map(str, rebuilt.counts))
