"""What the charts say about their data, beyond drawing it."""

from __future__ import annotations

import pandas as pd

from dashboard import charts


def test_the_latency_histograms_first_bucket_is_named_by_its_resolution() -> None:
    buckets = pd.DataFrame({"low_s": [0.0, 1.0], "high_s": [1.19e-6, 1.19], "records": [3, 5]})
    (bars,) = charts.latency_histogram(buckets).data
    assert list(bars.customdata) == ["under the arrivals' resolution", "1-1.19 s"]
    assert list(bars.y) == [3, 5]
