"""A deadline claim's lost ids, late records and checked records from the engine equal the
DuckDB reference's (tests/support/reference.py DEADLINE) on the same fingerprints and `now`:
on small property-based sets (whose source records pipeline p's `expected` predicate may
have filtered or left undecided: a filtered record is never lost nor late), and on a
generated pipeline judged over cycles by one incremental engine while its records age past
max_delay and late copies of lost records arrive."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dgm.config.analysis import AnalysisSettings
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.engine import Engine
from tests.support import engine_run
from tests.support.deadline_comparison import assert_agree, late_copies
from tests.support.fingerprint_rows import SOURCE, T0, small_tables
from tests.support.generated_fingerprints import pipeline as generated_pipeline
from tests.support.strength import by_strength


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


# (second, id, src, committed) of a sink copy: later seconds than the source's, so copies are
# timely, late or missing against a max_delay of 1 to 4 seconds.
SINK = st.tuples(
    st.integers(0, 12),
    st.sampled_from([None, "i0", "i1", "i2", "i3", "i4", "x"]),
    st.none(),
    st.sampled_from([True, True, False]),
)


@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@engine_run.spark_examples(by_strength(10, 20))  # DGM_LONG=1: 20 sets
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
