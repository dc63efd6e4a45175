"""Arrivals set by the audit: the LSO's segments from the offsets samples, and with_arrivals
against the analysis' own definition (spark_jobs.analyze.lag_seconds.Arrivals)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import Key, SampleStore
from spark_jobs.analyze.lag_seconds import Arrivals
from spark_jobs.audit.arrivals import ARRIVAL_BUCKET, needed, segments, with_arrivals
from spark_jobs.audit.offsets_samples import OffsetsSamples
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.schemas import FINGERPRINT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T0_US = int(T0.timestamp()) * 1_000_000
# A partition's samples: (seconds after T0, LSO), any order.
Samples = dict[Key, list[tuple[float, int]]]


def samples_table(samples: Samples) -> pa.Table:
    rows = [
        {"sampled_at": T0 + timedelta(seconds=s), "topic": t, "partition": p, "lso": lso}
        for (t, p), found in samples.items()
        for s, lso in found
    ]
    schema = pa.schema([SCHEMAS["offsets"].field(c) for c in ("sampled_at", "topic", "partition")])
    return pa.Table.from_pylist(rows, schema=schema.append(pa.field("lso", pa.int64())))


def us(second: float) -> int:
    return T0_US + round(second * 1_000_000)


def test_segments_follow_the_running_maximum_of_each_partition() -> None:
    samples: Samples = {
        # Flat, then back (8 < 10: the records it had passed stay passed), then on.
        ("t", 0): [(6, 20), (0, 5), (1, 5), (2, 10), (3, 8), (4, 12), (5, 12)],
        ("t", 1): [(1, 3), (0, 0)],
        ("u", 0): [(0, 7)],  # one sample: no segment
    }
    found = segments(samples_table(samples)).to_pylist()
    assert [tuple(r.values()) for r in found] == [
        ("t", 0, 5, 10, us(1), us(2)),
        ("t", 0, 10, 12, us(3), us(4)),
        ("t", 0, 12, 20, us(5), us(6)),
        ("t", 1, 0, 3, us(0), us(1)),
    ]
    assert segments(samples_table({})).num_rows == 0


def test_a_read_joins_only_the_segments_holding_its_offsets() -> None:
    found = segments(samples_table({("t", 0): [(0, 0), (1, 10), (2, 20), (3, 30)]}))
    chunk = [OffsetRange("t", 0, 10, 20), OffsetRange("u", 0, 0, 5)]
    assert [(r["lso0"], r["lso1"]) for r in needed(found, chunk).to_pylist()] == [(10, 20)]
    wider = [OffsetRange("t", 0, 9, 21)]
    assert len(needed(found, wider)) == 3


def expected(samples: Samples, key: Key, offsets: np.ndarray) -> list[tuple[Any, Any]]:
    """(arrived_at µs, resolution µs) per offset as Arrivals tells them; None where it knows
    no time (the LSO had passed the offset at the first sample, or no sample passed it)."""
    if key not in samples:
        return [(None, None)] * len(offsets)
    frame = pd.DataFrame(
        {
            "sampled_at": [pd.Timestamp(T0 + timedelta(seconds=s)) for s, _ in samples[key]],
            "lso": [lso for _, lso in samples[key]],
        }
    )
    never = np.full(len(offsets), np.iinfo(np.int64).max)
    when, width, first = Arrivals.of(frame).readable_at(offsets, never)
    return [
        (None, None) if np.isnan(w) or f else (w / 1000, r / 1000)
        for w, r, f in zip(when, width, first, strict=True)
    ]


def arrived(spark: Any, samples: Samples, offsets: Mapping[Key, Iterable[int]]) -> dict[Any, Any]:
    """(topic, partition, offset) -> (arrived_at µs, resolution µs) with_arrivals gives."""
    names = [f.name for f in FINGERPRINT.fields]
    rows = [
        [{"topic": t, "partition": p, "offset": o, "committed": True}.get(n) for n in names]
        for (t, p), found in offsets.items()
        for o in found
    ]
    frame = spark.createDataFrame(rows, FINGERPRINT)
    filled = with_arrivals(frame, spark.createDataFrame(segments(samples_table(samples))))
    assert filled.columns == names
    picked = filled.select(
        "topic", "partition", "offset", F.unix_micros("arrived_at"), "arrival_resolution_us"
    )
    return {(r[0], r[1], r[2]): (r[3], r[4]) for r in picked.collect()}


def agree(spark: Any, samples: Samples, offsets: dict[Key, list[int]]) -> None:
    found = arrived(spark, samples, offsets)
    assert len(found) == sum(len(o) for o in offsets.values())  # each record once
    for key, these in offsets.items():
        want = expected(samples, key, np.array(these, dtype=np.int64))
        for offset, (at, width) in zip(these, want, strict=True):
            got_at, got_width = found[(*key, offset)]
            if at is None:
                assert (got_at, got_width) == (None, None), (key, offset)
            else:
                # Arrivals works in float ns: ~0.25 µs off at today's epoch.
                assert abs(got_at - at) <= 1 and abs(got_width - width) <= 1, (key, offset)


def test_arrivals_agree_with_the_analysis_at_every_offset(spark: Any) -> None:
    samples: Samples = {
        ("t", 0): [(0, 5), (1, 5), (2, 10), (3, 8), (4, 12), (5.5, 12), (7, 20)],
        # Across bucket boundaries: one segment spans several buckets.
        ("t", 1): [
            (0, ARRIVAL_BUCKET - 2),
            (10, 3 * ARRIVAL_BUCKET + 1),
            (11, 3 * ARRIVAL_BUCKET + 2),
        ],
        ("u", 0): [(0, 0), (2.5, 4)],
    }
    boundary = [3 * ARRIVAL_BUCKET - 1, 3 * ARRIVAL_BUCKET, 3 * ARRIVAL_BUCKET + 1]
    offsets = {
        # Before the first sample's LSO (null), every segment boundary, past the last (null).
        ("t", 0): list(range(0, 23)),
        ("t", 1): [0, ARRIVAL_BUCKET - 3, ARRIVAL_BUCKET - 2, ARRIVAL_BUCKET, *boundary,
                   3 * ARRIVAL_BUCKET + 2],
        ("u", 0): [0, 3, 4],
        ("v", 0): [0],  # never sampled
    }  # fmt: skip
    agree(spark, samples, offsets)
    found = arrived(spark, samples, {("t", 0): [4, 5, 9, 19, 20]})
    assert found[("t", 0, 4)] == (None, None)  # passed at the first sample
    assert found[("t", 0, 5)] == (us(1) + 200_000, 1_000_000)  # (5 + 1 - 5) / 5 of 1s
    assert found[("t", 0, 9)] == (us(2), 1_000_000)  # the last offset a segment holds: t1
    assert found[("t", 0, 19)] == (us(7), 1_500_000)
    assert found[("t", 0, 20)] == (None, None)  # no sample past it yet


partition_samples = st.lists(
    st.tuples(st.integers(1, 5_000), st.integers(-20, 3 * ARRIVAL_BUCKET)), min_size=1, max_size=8
)


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.sampled_from([("t", 0), ("t", 1), ("u", 0)]), partition_samples))
def test_arrivals_agree_with_the_analysis_on_any_samples(
    spark: Any, drawn: dict[Key, list[tuple[int, int]]]
) -> None:
    samples: Samples = {}
    for key, steps in drawn.items():
        # Strictly later times (ms apart at least, like the files' names), LSO going up and
        # sometimes back.
        at, lso, series = 0.0, 0, []
        for gap_ms, change in steps:
            at, lso = at + gap_ms / 1000, max(0, lso + change)
            series.append((at, lso))
        samples[key] = series
    offsets: dict[Key, list[int]] = {}
    for key, series in samples.items():
        top = max(lso for _, lso in series)
        edges = {lso + d for _, lso in series for d in (-1, 0, 1)}
        offsets[key] = sorted({o for o in edges | {0, top + 5} if o >= 0})
    agree(spark, samples, offsets)


def offsets_rows(second: int, *partitions: tuple[str, int, int]) -> list[dict[str, object]]:
    at = T0 + timedelta(seconds=second)
    common = {"sampled_at": at, "cluster_id": "c", "leader": 1, "log_start_offset": 0}
    common |= {"lso_lag": 0, "lso_since": at, "lso_stuck_ms": 0}
    return [
        {**common, "topic": t, "partition": p, "high_watermark": lso, "lso": lso,
         "topic_id": f"id-{t}"}
        for t, p, lso in partitions
    ]  # fmt: skip


def test_the_history_reads_back_only_to_each_partitions_sample_at_its_start(
    tmp_path: Path,
) -> None:
    store = SampleStore(tmp_path)
    for second, lso in enumerate([0, 5, 9, 12]):
        store.write("offsets", offsets_rows(second, ("t", 0, lso), ("t", 1, 2 * lso)))
    samples = OffsetsSamples(tmp_path, {"t"}, 1)
    assert [(s.partition, s.lso) for s in samples.latest()] == [(0, 12), (1, 24)]
    assert samples.topic_ids() == {"t": "id-t"}
    history = samples.history({("t", 0): 6})
    assert sorted(history["lso"].to_pylist()) == [5, 9, 12]
    assert set(history["partition"].to_pylist()) == {0}
    # A start no sample was at or below: every file is read, the oldest sample first.
    assert sorted(samples.history({("t", 1): -1})["lso"].to_pylist()) == [0, 10, 18, 24]
    assert samples.history({}).num_rows == 0
    assert OffsetsSamples(tmp_path / "none", {"t"}, 5).history({("t", 0): 0}).num_rows == 0
