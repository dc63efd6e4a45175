"""The engine's lost ids (and their windows, beyond-retention and aborted-read counts) equal
the DuckDB reference's on the same fingerprints and committed offsets: on small
property-based sets (group commits or an external sink's own offsets), and on a generated set
of 1,000,000 fingerprints with injected losses, duplicates, sequence gaps and aborted records,
read back from Parquet (whose aborted reads a numpy count checks too)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from dgm.contracts.published import LOST
from spark_jobs.schemas import FINGERPRINT
from tests import reference
from tests.generated_fingerprints import pipeline
from tests.spark_jobs.analyze import engine_run
from tests.strength import only_at_full_strength

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ARROW_FINGERPRINT = to_arrow_schema(FINGERPRINT)
COMMITTED = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("committed_offset", pa.int64())]
)
# The published columns but the pipeline and the cluster (filled when the analysis publishes,
# from the topic: spark_jobs/analyze/cluster_columns.py).
RESULT = [c for c in LOST.names if c not in ("pipeline", "cluster")]


def _value(v: Any) -> Any:
    if isinstance(v, datetime):  # naive from Spark (UTC session), aware from DuckDB
        return round(v.replace(tzinfo=UTC).timestamp() * 1_000_000)
    return v


def canonical(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    tuples = [tuple(_value(row[c]) for c in RESULT) for row in rows]
    return sorted(tuples, key=lambda t: tuple((v is None, "" if v is None else v) for v in t))


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


def assert_same(ours: list[dict[str, Any]], theirs: pa.Table) -> list[tuple[Any, ...]]:
    mine = canonical(ours)
    assert mine == canonical(theirs.to_pylist())
    return mine


def lost_per_window(theirs: pa.Table) -> dict[datetime, int]:
    """The reference's lost counts per 60-second window of their window_at."""
    found: dict[datetime, int] = {}
    for r in theirs.to_pylist():
        at = r["window_at"].astimezone(UTC)
        start = at - timedelta(seconds=at.timestamp() % 60)
        found[start] = found.get(start, 0) + r["missing"]
    return found


# (partition, second, id, producer, seq, committed, filter) of a source record, small
# alphabets so ids, sessions, sequences and timestamps collide often; the sink copies name a
# source offset. filter: what pipeline p's `expected` predicate said of it (None: true).
SOURCE = st.tuples(
    st.integers(0, 1),
    st.integers(0, 6),
    st.sampled_from([None, "i0", "i1", "i2", "i3", "i4"]),
    st.sampled_from([None, "p0", "p1"]),
    st.one_of(st.none(), st.integers(0, 5)),
    st.sampled_from([True, True, False]),
    st.sampled_from([None, None, "filtered", "undecided", "other"]),
)
SINK = st.tuples(
    st.integers(0, 8),
    st.sampled_from([None, "i0", "i1", "i2", "i3", "i4", "x"]),
    st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(0, 8))),  # src p/offset
    st.sampled_from([True, True, False]),
)
COMMITS = st.dictionaries(st.integers(0, 2), st.integers(0, 10), max_size=3)


def fingerprint_row(
    topic: str,
    partition: int,
    offset: int,
    second: int,
    message_id: str | None,
    producer: str | None = None,
    seq: int | None = None,
    src: tuple[int, int] | None = None,
    committed: bool = True,
    filter_state: str | None = None,
) -> dict[str, Any]:
    """`filter_state`: "filtered" or "undecided" by pipeline p's predicate, "other": filtered
    by another pipeline's (p checks it), None: no predicate excluded it."""
    lineage = None if src is None else f"s/{src[0]}/{src[1]}"
    values = (topic, partition, offset, T0 + timedelta(seconds=second), message_id, None)
    values += (producer, seq, lineage, *((None,) * 3 if src is None else ("s", *src)))
    filtered_by = {"filtered": ["p"], "other": ["q"]}.get(filter_state or "")
    undecided_by = ["p"] if filter_state == "undecided" else None
    names = [f.name for f in FINGERPRINT.fields]
    return dict(zip(names, (*values, committed, filtered_by, undecided_by), strict=True))


def small_tables(
    sources: list[tuple[Any, ...]],
    sinks: list[tuple[Any, ...]],
    commits: dict[int, int],
    held_from: tuple[int, int, int] = (0, 0, 0),
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """`held_from`: the first offset held of source partitions 0 and 1 and of the sink (the
    ones before were deleted by retention, or never audited)."""
    offsets: Counter[int] = Counter({0: held_from[0], 1: held_from[1]})
    source_rows = []
    for partition, second, message_id, producer, seq, committed, state in sources:
        source_rows.append(
            fingerprint_row(
                "s", partition, offsets[partition], second, message_id, producer, seq,
                committed=committed, filter_state=state,
            )
        )  # fmt: skip
        offsets[partition] += 1
    sink_rows = [
        fingerprint_row("k", 0, held_from[2] + n, second, message_id, src=src, committed=committed)
        for n, (second, message_id, src, committed) in enumerate(sinks)
    ]
    committed_rows = [
        {"topic": "s", "partition": p, "committed_offset": o} for p, o in commits.items()
    ]
    return (
        pa.Table.from_pylist(source_rows, schema=ARROW_FINGERPRINT),
        pa.Table.from_pylist(sink_rows, schema=ARROW_FINGERPRINT),
        pa.Table.from_pylist(committed_rows, schema=COMMITTED),
    )


@pytest.mark.filterwarnings("ignore:The recursion limit will not be reset")
@engine_run.spark_examples(25)
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
