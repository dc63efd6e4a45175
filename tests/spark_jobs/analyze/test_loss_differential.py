"""The engine's lost ids (and their windows, beyond-retention and aborted-read counts) equal
the DuckDB reference's on the same fingerprints and committed offsets: on small
property-based sets (group commits or an external sink's own offsets), and on a generated set
of 1,000,000 fingerprints with injected losses, duplicates, sequence gaps and aborted records,
read back from Parquet (whose aborted reads a numpy count checks too)."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import engine_run, reference
from tests.support.fingerprint_rows import (
    SOURCE,
    T0,
    small_tables,
)
from tests.support.generated_fingerprints import pipeline
from tests.support.lost_comparison import assert_same, lost_per_window
from tests.support.strength import by_strength, only_at_full_strength


def engine_lost(
    spark: Any,
    source: pa.Table,
    sink: pa.Table,
    committed: pa.Table,
    cutoff: datetime,
    external: bool,
) -> engine_run.Tables:
    """The engine's tables of one pipeline 'p' over FINGERPRINT and COMMITTED rows; an
    external sink's rows carry its table's name as their topic, as the audit writes them."""
    if external:
        topic = pa.array([engine_run.EXTERNAL] * sink.num_rows, pa.string())
        sink = sink.set_column(0, sink.schema.field("topic"), topic)
    commits = {(r["topic"], r["partition"]): r["committed_offset"] for r in committed.to_pylist()}
    # now - grace = cutoff, whatever grace the config says.
    config = engine_run.config(external=external)
    now = cutoff + timedelta(seconds=config.analysis.grace_s)
    fingerprints = pa.concat_tables([source, sink])
    return engine_run.run(spark, fingerprints, config, commits, now)


# (second, id, src, committed) of a sink copy; its src names a source offset.
SINK = st.tuples(
    st.integers(0, 8),
    st.sampled_from([None, "i0", "i1", "i2", "i3", "i4", "x"]),
    st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(0, 8))),  # src p/offset
    st.sampled_from([True, True, False]),
)
COMMITS = st.dictionaries(st.integers(0, 2), st.integers(0, 10), max_size=3)


@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@engine_run.spark_examples(by_strength(12, 25))  # DGM_LONG=1: 25 sets
@given(
    sources=st.lists(SOURCE, max_size=20),
    sinks=st.lists(SINK, max_size=15),
    commits=COMMITS,
    cutoff_second=st.integers(0, 7),
    external=st.booleans(),
    held_from=st.tuples(*(st.sampled_from([0, 0, 3]) for _ in range(3))),
)
def test_small_sets_agree(
    spark: Any,
    one_shuffle_partition: None,
    sources: list[tuple[Any, ...]],
    sinks: list[tuple[Any, ...]],
    commits: dict[int, int],
    cutoff_second: int,
    external: bool,
    held_from: tuple[int, int, int],
) -> None:
    source, sink, committed = small_tables(sources, sinks, commits, held_from)
    cutoff = T0 + timedelta(seconds=cutoff_second)
    tables = engine_lost(spark, source, sink, committed, cutoff, external)
    theirs = reference.lost(source, sink, committed, cutoff, external)
    assert_same(tables.lost, theirs)
    assert tables.lost_per_window() == lost_per_window(theirs)
    assert tables.total("beyond_retention") == reference.beyond_retention(
        source, sink, committed, cutoff, external
    )
    filtered, undecided = reference.filtered(source)
    assert (tables.total("filtered"), tables.total("filter_undecided")) == (filtered, undecided)


@pytest.mark.slow
@only_at_full_strength  # CI: the small sets and the 100k reference differential; DGM_LONG=1: 1M
def test_1m_generated_fingerprints_agree(spark: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    generated = pipeline("m", sends=495_000, partitions=8, seed=11, topics=("s", "k"))
    fingerprints = pa.concat_tables([generated.source, generated.sink])
    assert 990_000 <= fingerprints.num_rows <= 1_010_000
    pq.write_table(fingerprints, tmp_path / "fingerprints.parquet")
    generated_s = time.monotonic() - started

    frame = spark.read.parquet(str(tmp_path / "fingerprints.parquet"))
    commits = {(r["topic"], r["partition"]): r["committed_offset"]
               for r in generated.committed.to_pylist()}  # fmt: skip
    config = engine_run.config()
    now = generated.cutoff + timedelta(seconds=config.analysis.grace_s)
    started = time.monotonic()
    tables = engine_run.run(spark, frame, config, commits, now)
    spark_s = time.monotonic() - started

    source_table = fingerprints.filter(pc.equal(fingerprints["topic"], "s"))
    sink_table = fingerprints.filter(pc.equal(fingerprints["topic"], "k"))
    started = time.monotonic()
    theirs = reference.lost(source_table, sink_table, generated.committed, generated.cutoff)
    reference_s = time.monotonic() - started
    rows = assert_same(tables.lost, theirs)
    assert tables.lost_per_window() == lost_per_window(theirs)
    causes = Counter(r["cause"] for r in tables.lost)
    assert causes["not in sink"] > 1_000 and causes["sequence gap"] > 1_000, causes
    assert tables.total("aborted_reads") == generated.aborted_reads > 1_000
    print(
        f"\n1M loss differential: generate+write {generated_s:.1f}s, "
        f"Spark {spark_s:.1f}s, DuckDB {reference_s:.1f}s, rows {len(rows)} {dict(causes)}"
    )
