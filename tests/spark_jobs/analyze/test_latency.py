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
