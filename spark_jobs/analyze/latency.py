"""Delivery latency (docs/design.md, "Delivery latency"): per checked record with a sink
copy, how long after its source record became readable its first sink copy did, from the
arrival times the audit stamps on every fingerprint (`arrived_at`, from the LSO samples).

Latencies are kept as a histogram, not per record: per pipeline and window, how many
records fall in each bucket of BUCKETS_PER_OCTAVE logarithmic buckets a doubling, so the
counts sum across the ids of a shuffle and across cycles like every other count (counts.py),
and a quantile read from them is at most one bucket wide (19%) off, on top of the arrivals'
own resolution (the sampling interval).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BUCKETS_PER_OCTAVE = 4
KIND = "latency"  # the output rows' kind; `partition` holds the bucket, `delivered` the count


def bucket_of(latency_us: np.ndarray) -> np.ndarray:
    """The bucket of each latency (micros): b holds [2^(b/4), 2^((b+1)/4)) µs; latencies
    under 1 µs (both arrivals interpolated in one sampling interval) fall in bucket 0."""
    clamped = np.maximum(np.asarray(latency_us, dtype="float64"), 1.0)
    found: np.ndarray = np.floor(BUCKETS_PER_OCTAVE * np.log2(clamped)).astype("int64")
    return found


def bucket_bounds_s(bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) seconds of each bucket; bucket 0 starts at 0."""
    b = np.asarray(bucket, dtype="float64")
    low = np.where(b == 0, 0.0, 2.0 ** (b / BUCKETS_PER_OCTAVE) / 1e6)
    return low, 2.0 ** ((b + 1) / BUCKETS_PER_OCTAVE) / 1e6


def quantiles(histogram: pd.DataFrame, qs: tuple[float, ...]) -> pd.DataFrame:
    """Per pipeline of `histogram` (pipeline, bucket, records): each quantile q as the upper
    bound (seconds) of the bucket holding the q-th record, `max` the highest non-empty
    bucket's, and `measured` (records). A pipeline key may be any sortable value (a
    (pipeline, window) pair too). By one sort, not a pandas group per key: a cycle reads
    every pipeline window's histogram."""
    columns = ["pipeline", "measured", "max", *(f"p{round(q * 100)}" for q in qs)]
    if histogram.empty:
        return pd.DataFrame(columns=columns)
    codes, keys = pd.factorize(histogram["pipeline"], sort=True)
    bucket = histogram["bucket"].to_numpy(dtype="int64")
    records = histogram["records"].to_numpy(dtype="int64")
    order = np.lexsort((bucket, codes))
    codes, bucket, records = codes[order], bucket[order], records[order]
    # One row per (key, bucket) with its records summed; empty buckets dropped.
    first = np.flatnonzero(np.r_[True, (codes[1:] != codes[:-1]) | (bucket[1:] != bucket[:-1])])
    summed = np.add.reduceat(records, first)
    full = summed > 0
    codes, bucket, summed = codes[first][full], bucket[first][full], summed[full]
    if len(codes) == 0:
        return pd.DataFrame(columns=columns)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    cumulative = np.cumsum(summed)  # increasing: every bucket kept holds records
    before = cumulative[starts] - summed[starts]  # records of the keys sorted before
    totals = cumulative[ends - 1] - before
    _, highs = bucket_bounds_s(bucket)
    found = {"pipeline": keys[codes[starts]], "measured": totals, "max": highs[ends - 1]}
    for q in qs:
        at = np.searchsorted(cumulative, before + q * totals, side="left")
        found[f"p{round(q * 100)}"] = highs[np.minimum(at, ends - 1)]
    frame = pd.DataFrame(found, columns=columns)
    return frame.astype({"measured": "int64", "max": "float64"})
