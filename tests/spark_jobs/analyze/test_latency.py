"""Delivery latency (spark_jobs/analyze/latency.py): buckets, quantiles within a bucket, and
the per-record rule on hand-made rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.analyze.latency import bucket_bounds_s, bucket_of, latency_rows, quantiles


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


def test_the_latency_is_first_readable_sink_copy_minus_the_source_record() -> None:
    # Rows as loss.lost gives checked and per_id its sinks: pipeline 0, ids 1 and 2.
    checked = pd.DataFrame(
        {"pipeline": [0, 0, 0], "message_id": [1, 1, 2], "ts": [10, 20, 30],
         "has_ts": True, "topic": 0, "partition": 0, "offset": [5, 6, 7],
         "_row": [0, 1, 2], "counted": [False, False, True], "is_beyond": False}
    )  # fmt: skip
    sinks = pd.DataFrame({"pipeline": 0, "message_id": [1, 1], "has_id": True, "_row": [3, 4]})
    arrived = pd.Series([1_000_000.0, 1_500_000.0, 2_000_000.0, 9_000_000.0, 4_000_000.0])
    rows = latency_rows(checked, sinks, arrived)
    # id 1: its first checked record (row 0, arrived 1 s), its first readable copy (4 s);
    # id 2 is lost (counted): no latency.
    assert rows["bucket"].tolist() == bucket_of(np.array([3_000_000.0])).tolist()
    assert rows["ts"].tolist() == [10]


def test_an_unknown_arrival_measures_nothing() -> None:
    checked = pd.DataFrame(
        {"pipeline": [0], "message_id": [1], "ts": [10], "has_ts": True, "topic": 0,
         "partition": 0, "offset": [5], "_row": [0], "counted": False, "is_beyond": False}
    )  # fmt: skip
    sinks = pd.DataFrame({"pipeline": [0], "message_id": [1], "has_id": True, "_row": [1]})
    assert latency_rows(checked, sinks, pd.Series([np.nan, 4e6])).empty
