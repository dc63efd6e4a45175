"""The engine's records out of order (the out_of_order table, its counts per topic and per
pipeline) equal the DuckDB reference's on the same fingerprints: small property-based sets
arriving over two cycles (a rebuild, then new records judged against the marks it kept), and
a constructed set judged at once."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dgm.contracts.vocabulary import OrderAnomaly
from spark_jobs.analysis_input import Fingerprints
from spark_jobs.analyze.engine import Engine
from tests.support import engine_run, reference
from tests.support.engine_run import FAR
from tests.support.fingerprint_rows import ARROW_FINGERPRINT, fingerprint_row
from tests.support.order_comparison import canonical
from tests.support.strength import by_strength

# (partition, producer, seq, committed) of a source record; (partition, src partition, src
# offset, committed) of a sink record (source topic 's', or 'o', a topic p does not read).
SOURCE = st.tuples(
    st.integers(0, 1),
    st.sampled_from([None, "p0", "p1"]),
    st.one_of(st.none(), st.integers(0, 5)),
    st.sampled_from([True, True, False]),
)
SINK = st.tuples(
    st.integers(0, 1),
    st.sampled_from(["s", "s", "o"]),
    st.integers(0, 1),
    st.one_of(st.none(), st.integers(0, 6)),
    st.sampled_from([True, True, False]),
)


def tables(sources: list[tuple[Any, ...]], sinks: list[tuple[Any, ...]]) -> pa.Table:
    offsets: Counter[tuple[str, int]] = Counter()
    rows = []
    for n, (partition, producer, seq, committed) in enumerate(sources):
        offset = offsets[("s", partition)]
        offsets[("s", partition)] += 1
        rows.append(
            fingerprint_row("s", partition, offset, n, f"i{n}", producer, seq, committed=committed)
        )
    for n, (partition, src_topic, src_partition, src_offset, committed) in enumerate(sinks):
        offset = offsets[("k", partition)]
        offsets[("k", partition)] += 1
        # A record without dgm-src holds an id no source record holds: the reference reads
        # dgm-src alone, and the id join that would place it is test_order_lineage.py's.
        message_id = f"i{n}" if src_offset is not None else f"u{n}"
        row = fingerprint_row("k", partition, offset, n, message_id, committed=committed)
        if src_offset is not None:
            lineage = f"{src_topic}/{src_partition}/{src_offset}"
            row |= {"lineage": lineage, "src_topic": src_topic,
                    "src_partition": src_partition, "src_offset": src_offset}  # fmt: skip
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=ARROW_FINGERPRINT)


def assert_agree(ours: engine_run.Tables, fingerprints: pa.Table) -> int:
    source = engine_run.of_topics(fingerprints, "s")
    sink = engine_run.of_topics(fingerprints, "k")
    theirs = reference.out_of_order(source, sink)
    mine = canonical(ours.out_of_order)
    assert mine == canonical(theirs.to_pylist())
    per_anomaly = Counter(r["anomaly"] for r in theirs.to_pylist())
    assert ours.total("producer_out_of_order") == per_anomaly[OrderAnomaly.OUT_OF_ORDER]
    # The sink's count: its records made from p's own source topic only.
    from_source = sum(1 for r in theirs.to_pylist() if r["stream"].startswith("s/"))
    assert ours.total("sink_out_of_order") == from_source
    per_topic = Counter(r["topic"] for r in theirs.to_pylist())
    summary = {r["topic"]: r["out_of_order"] for r in ours.summary()}
    assert {t: summary.get(t, 0) for t in ("s", "k")} == {t: per_topic[t] for t in ("s", "k")}
    return len(mine)


SETTINGS = engine_run.spark_examples(by_strength(6, 10))  # DGM_LONG=1: 10 sets


@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@SETTINGS
@given(
    sources=st.lists(SOURCE, max_size=16),
    sinks=st.lists(SINK, max_size=12),
    cut=st.floats(0, 1),
)
def test_small_sets_agree_over_two_cycles(
    spark: Any,
    one_shuffle_partition: None,
    sources: list[tuple[Any, ...]],
    sinks: list[tuple[Any, ...]],
    cut: float,
) -> None:
    # The first `cut` of the fingerprints (a rebuild), then the rest (judged by the marks).
    fingerprints = tables(sources, sinks)
    first = fingerprints.slice(0, round(cut * fingerprints.num_rows))
    rest = fingerprints.slice(first.num_rows)
    config, engine = engine_run.config(), Engine()
    before = spark.createDataFrame(first, first.schema)
    assert_agree(engine_run.tables_of(engine.cycle(config, Fingerprints(before), {}, FAR)), first)
    kept = spark.createDataFrame(fingerprints, fingerprints.schema)
    loaded = replace(
        Fingerprints(kept), before=before, added=spark.createDataFrame(rest, rest.schema)
    )
    assert_agree(engine_run.tables_of(engine.cycle(config, loaded, {}, FAR)), fingerprints)
    assert "touched" in engine.last  # the second cycle followed by difference


def test_a_constructed_set_names_each_record_behind(
    spark: Any, one_shuffle_partition: None
) -> None:
    # Session p0 writes seq 0 1 2 3, a retried 1 2 after them, then 4; the sink copies
    # source offsets 0 1 2 of s/0, then 1 2 again (a reprocessed batch), then 3.
    sources = [(0, "p0", seq, True) for seq in (0, 1, 2, 3, 1, 2, 4)]
    sinks = [(0, "s", 0, offset, True) for offset in (0, 1, 2, 1, 2, 3)]
    fingerprints = tables(sources, sinks)
    ours = engine_run.run(spark, fingerprints)
    assert assert_agree(ours, fingerprints) == 3
    shown = {(r["topic"], r["offset"], r["position"], r["preceded_by"], r["preceded_at"])
             for r in ours.out_of_order}  # fmt: skip
    # The second copy of source offset 2 follows nothing higher: in order.
    assert shown == {("s", 4, 1, 3, 3), ("s", 5, 2, 3, 3), ("k", 3, 1, 2, 2)}
