"""What the charts say about their data, beyond drawing it."""

from __future__ import annotations

import pandas as pd

from dashboard import charts


def test_the_latency_histograms_first_bucket_is_named_by_its_resolution() -> None:
    buckets = pd.DataFrame(
        {"low_s": [0.0, 1.0, 1.19], "high_s": [1.19e-6, 1.19, 1.41], "records": [3, 5, 2]}
    )
    under, measured = charts.latency_histogram(buckets).data
    # Bucket 0 is its own, named series: not a latency of a microsecond.
    assert under.name == charts.UNDER_RESOLUTION and list(under.y) == [3]
    assert list(under.customdata) == [charts.UNDER_RESOLUTION]
    assert list(measured.customdata) == ["1-1.19 s", "1.19-1.41 s"]
    assert list(measured.y) == [5, 2]
    only_measured = charts.latency_histogram(buckets.iloc[1:])
    assert len(only_measured.data) == 1 and not only_measured.layout.showlegend
