"""Small formatting helpers of dashboard/ui.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from dashboard import ui


def test_when_says_never_for_a_missing_or_null_time() -> None:
    assert ui.when(None) == "never"
    # A null TIMESTAMPTZ cell comes out of a DataFrame row as NaT, not None.
    assert ui.when(pd.NaT) == "never"
    moment = datetime(2026, 1, 1, 12, 0, 1, tzinfo=UTC)
    assert ui.when(moment).startswith("2026-01-01 12:00:01 UTC (")


def test_seconds_says_small_latencies_in_ms_or_us_never_in_exponents() -> None:
    told = {v: ui.seconds(v) for v in (1.19e-06, 4.2e-4, 0.0083, 0.42, 12.5, 0.0, -0.003, 90)}
    assert told == {
        1.19e-06: "1.19 µs",
        4.2e-4: "0.42 ms",
        0.0083: "8.3 ms",
        0.42: "0.42 s",
        12.5: "12.5 s",
        0.0: "0 s",
        -0.003: "-3 ms",
        90: ui.span(pd.Timedelta(seconds=90).to_pytimedelta()),
    }
    assert not any("e-" in text for text in told.values())
    assert ui.seconds(None) == "?" and ui.seconds(float("nan")) == "?"
