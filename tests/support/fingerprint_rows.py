"""FINGERPRINT rows made by hand, the fingerprints' schema and the groups' committed offsets
as Arrow, and small property-based tables of a source `s` and a sink `k`: what the engine's
unit and differential tests feed it (and the DuckDB reference, tests/support/reference.py)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from spark_jobs.schemas import FINGERPRINT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ARROW_FINGERPRINT = to_arrow_schema(FINGERPRINT)
COMMITTED = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("committed_offset", pa.int64())]
)


def fp(
    topic: str,
    partition: int,
    offset: int,
    message_id: str | None,
    second: int = 0,
    producer: str | None = None,
    seq: int | None = None,
    lineage: str | None = None,
    committed: bool = True,
) -> tuple[Any, ...]:
    """One FINGERPRINT row; src_* parsed from `lineage` the way fingerprints() does."""
    src: tuple[Any, ...] = (None, None, None)
    if lineage is not None:
        src_topic, src_partition, src_offset = lineage.rsplit("/", 2)
        src = (src_topic, int(src_partition), int(src_offset))
    at = T0 + timedelta(seconds=second)
    return (topic, partition, offset, at, message_id, None, producer, seq, lineage, *src, committed)


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
    arrival = (None, None)  # arrived_at, arrival_resolution_us
    return dict(zip(names, (*values, committed, filtered_by, undecided_by, *arrival), strict=True))


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
