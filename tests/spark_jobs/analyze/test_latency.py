"""Delivery latency (spark_jobs/analyze/latency.py): buckets and quantiles within a bucket
(the per-record rule: test_late.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.analyze.latency import bucket_bounds_s, bucket_of, quantiles


@given(st.floats(min_value=1.0, max_value=1e12, allow_nan=False))
def test_a_latency_lies_in_its_bucket(latency_us: float) -> None:
    bucket = bucket_of(np.array([latency_us]))
    low, high = bucket_bounds_s(bucket)
    assert low[0] * 1e6 <= latency_us * (1 + 1e-12) and latency_us < high[0] * 1e6 * (1 + 1e-12)
    assert high[0] / max(low[0], 1e-6) <= 2**0.25 + 1e-9 or bucket[0] == 0


@given(st.lists(st.floats(min_value=0.001, max_value=1e5), min_size=1, max_size=300))
def test_a_quantile_is_within_one_bucket_above_the_exact_one(seconds: list[float]) -> None:
    latencies = np.array(seconds) * 1e6
    found = pd.DataFrame({"bucket": bucket_of(latencies)}).value_counts().rename("records")
    histogram = found.reset_index().assign(pipeline="p")
    got = quantiles(histogram, (0.5, 0.99)).iloc[0]
    for q, column in ((0.5, "p50"), (0.99, "p99")):
        exact = float(np.quantile(seconds, q, method="inverted_cdf"))
        assert exact <= got[column] * (1 + 1e-9) <= exact * 2**0.25 * (1 + 1e-9) + 1e-6
    assert got["measured"] == len(seconds)
    assert max(seconds) <= got["max"] * (1 + 1e-9) <= max(seconds) * 2**0.25 * (1 + 1e-9) + 1e-6


def per_key(histogram: pd.DataFrame, qs: tuple[float, ...]) -> pd.DataFrame:
    """quantiles' definition walked literally: a group per key, its buckets summed."""
    rows = []
    for pipeline, part in histogram.groupby("pipeline", sort=True):
        counts = part.groupby("bucket")["records"].sum().sort_index()
        counts = counts[counts > 0]
        total = int(counts.sum())
        if total == 0:
            continue
        cumulative = counts.cumsum().to_numpy()
        _, highs = bucket_bounds_s(counts.index.to_numpy())
        found = {"pipeline": pipeline, "measured": total, "max": float(highs[-1])}
        for q in qs:
            at = int(np.searchsorted(cumulative, q * total, side="left"))
            found[f"p{round(q * 100)}"] = float(highs[min(at, len(highs) - 1)])
        rows.append(found)
    columns = ["pipeline", "measured", "max", *(f"p{round(q * 100)}" for q in qs)]
    return pd.DataFrame(rows, columns=columns)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 3),  # a window, for the (pipeline, window) keys
            st.integers(0, 40),
            st.integers(-3, 20),  # counts are sums of signed tallies: some cancel out
        ),
        max_size=120,
    ),
    st.booleans(),
)
def test_quantiles_by_one_sort_equal_a_group_per_key(
    rows: list[tuple[str, int, int, int]], windowed: bool
) -> None:
    histogram = pd.DataFrame(rows, columns=["pipeline", "window", "bucket", "records"])
    if windowed:
        keys = list(zip(histogram["pipeline"], histogram["window"], strict=True))
        histogram = histogram.assign(pipeline=pd.Series(keys, dtype=object))
    qs = (0.5, 0.95, 0.99)
    found, wanted = quantiles(histogram, qs), per_key(histogram, qs)
    assert list(found.columns) == list(wanted.columns)
    assert found.to_dict("records") == wanted.to_dict("records")
