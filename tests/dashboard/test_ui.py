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
