from __future__ import annotations

from collectors.lag import lag_from_hw, lag_from_lso


def test_lag_both_ways() -> None:
    # committed 0-4, marker 5, open transaction 6-10: high watermark 11, LSO 6.
    assert lag_from_hw(11, 6) == 5  # what other tools show: the open records count as lag
    assert lag_from_lso(6, 6) == 0  # a read_committed consumer at 6 is caught up


def test_past_the_lso_is_negative_and_unknown_is_none() -> None:
    assert lag_from_lso(6, 9) == -3
    assert lag_from_hw(None, 3) is None and lag_from_lso(None, 3) is None
