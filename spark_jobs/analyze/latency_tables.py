"""The delivery-latency tables (docs/design.md, "Delivery latency"): the histogram of the
engine's latency counts per pipeline window, and its quantiles on the verdicts and the
pipeline windows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dgm.contracts import published as tables
from spark_jobs.analyze.latency import KIND, bucket_bounds_s, quantiles
from spark_jobs.analyze.output import NO_TIME
from spark_jobs.analyze.publish import conform_arrow

Row = dict[str, Any]
QUANTILES = (0.5, 0.95, 0.99)
_STAMP = pa.timestamp("us", tz="UTC")


def histogram(counts: pd.DataFrame) -> pd.DataFrame:
    """(pipeline, window_us, bucket, records) of the engine's summed counts (counts.summed)."""
    rows = counts[(counts["kind"] == KIND) & (counts["delivered"] != 0)]
    return pd.DataFrame(
        {
            "pipeline": rows["pipeline"].to_numpy(),
            "window_us": rows["window_us"].to_numpy(dtype="int64"),
            "bucket": rows["partition"].to_numpy(dtype="int64"),
            "records": rows["delivered"].to_numpy(dtype="int64"),
        }
    )


def histogram_table(found: pd.DataFrame) -> pa.Table:
    low, high = bucket_bounds_s(found["bucket"].to_numpy())
    window = found["window_us"].to_numpy(dtype="int64")
    untimed = window == NO_TIME
    data = {
        "pipeline": pa.array(found["pipeline"].astype(object), pa.string()),
        "window_start": pa.array(np.where(untimed, 0, window), mask=untimed).cast(_STAMP),
        "low_s": pa.array(low),
        "high_s": pa.array(high),
        "records": pa.array(found["records"].to_numpy(dtype="int64")),
    }
    return conform_arrow(pa.table(data), tables.LATENCY_HISTOGRAM)


def _filled(row: Row, found: Row | None) -> Row:
    if found is None:
        return row | {"latency_measured": 0}
    return row | {
        "latency_p50_s": found["p50"],
        "latency_p95_s": found["p95"],
        "latency_p99_s": found["p99"],
        "latency_max_s": found["max"],
        "latency_measured": int(found["measured"]),
    }


def with_latency(
    counts: pd.DataFrame, verdicts: list[Row], windows: list[Row]
) -> tuple[pa.Table, list[Row], list[Row]]:
    """(latency_histogram, verdicts and pipeline_windows rows with the latency quantiles)."""
    found = histogram(counts)
    overall = {r["pipeline"]: r for r in quantiles(found, QUANTILES).to_dict("records")}
    timed = found[found["window_us"] != NO_TIME]
    keyed = timed.assign(pipeline=list(zip(timed["pipeline"], timed["window_us"], strict=True)))
    per_window = {r["pipeline"]: r for r in quantiles(keyed, QUANTILES).to_dict("records")}

    def key(row: Row) -> tuple[str, int] | None:
        start = row.get("window_start")
        return None if start is None else (row["pipeline"], round(start.timestamp() * 1e6))

    verdict_rows = [_filled(r, overall.get(r["pipeline"])) for r in verdicts]
    window_rows = [_filled(r, per_window.get(key(r))) for r in windows]
    return histogram_table(found), verdict_rows, window_rows
