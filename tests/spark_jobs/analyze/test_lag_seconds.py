"""Lag in seconds against a model of the log: records arrive at known times, the collector
samples the LSO now and then, and dgm must place the oldest uncommitted record's arrival
within the two samples around it (docs/design.md, "Lag in seconds")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.analyze.lag_seconds import catch_up, lagged_group_offsets, with_lag_seconds

T0 = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def _frames(arrivals_s: list[float], samples_s: list[float], committed: list[int]):
    """offsets and group_offsets frames for one partition: record o arrives at arrivals_s[o];
    a sample at s sees LSO = records arrived by s and the group's committed offset."""
    arrived = np.array(arrivals_s)
    times = [T0 + timedelta(seconds=s) for s in samples_s]
    lso = [int((arrived <= s).sum()) for s in samples_s]
    offsets = pd.DataFrame({"sampled_at": times, "topic": "t", "partition": 0, "lso": lso})
    group = pd.DataFrame(
        {
            "sampled_at": times,
            "topic": "t",
            "partition": 0,
            "committed_offset": committed,
            "lag_from_lso": [max(end - c, 0) for end, c in zip(lso, committed, strict=True)],
        }
    )
    return offsets, group


def test_a_steady_stream_is_timed_exactly() -> None:
    # 10 records/s from t=0.1 s; sampled every 5 s; the group committed 20 at t = 10 s:
    # record 20 arrived at 2.1 s, so its lag is 7.9 s.
    arrivals = [0.1 + o / 10 for o in range(200)]
    offsets, group = _frames(arrivals, [0.0, 5.0, 10.0], [0, 0, 20])
    lagged = with_lag_seconds(group, offsets)
    assert lagged["lag_s"].iloc[2] == pytest.approx(7.9)
    assert lagged["lag_s_resolution"].iloc[2] == 5.0
    assert not lagged["lag_s_at_least"].iloc[2]


def test_nothing_left_is_no_lag_and_an_old_record_is_at_least() -> None:
    arrivals = [0.5 * o for o in range(40)]
    # The first sample (at 10 s) already has the LSO at 21: record 3 arrived before it.
    offsets, group = _frames(arrivals, [10.0, 15.0], [3, 31])
    lagged = with_lag_seconds(group, offsets)
    assert lagged["lag_s_at_least"].iloc[0] and lagged["lag_s"].iloc[0] == 0.0
    assert lagged["lag_s"].iloc[1] == 0.0 and lagged["lag_s_resolution"].iloc[1] == 0.0


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 30.0), min_size=1, max_size=60),
    sample_gaps=st.lists(st.floats(0.5, 20.0), min_size=1, max_size=12),
    data=st.data(),
)
def test_the_true_lag_lies_within_the_resolution(gaps, sample_gaps, data) -> None:
    arrivals = list(np.cumsum(gaps))
    samples = list(np.cumsum(sample_gaps))
    lso = [int((np.array(arrivals) <= s).sum()) for s in samples]
    committed = [data.draw(st.integers(0, end)) for end in lso]
    offsets, group = _frames(arrivals, samples, committed)
    lagged = with_lag_seconds(group, offsets)
    for row, s, c, end in zip(lagged.itertuples(), samples, committed, lso, strict=True):
        if c >= end:
            assert row.lag_s == 0.0
            continue
        true_lag = s - arrivals[c]
        # Sample times are whole microseconds (timedelta): a few of them of rounding.
        if row.lag_s_at_least:
            assert row.lag_s <= true_lag + 1e-5
        else:
            assert abs(row.lag_s - true_lag) <= row.lag_s_resolution + 1e-5


def test_catching_up_and_falling_behind() -> None:
    at = [pd.Timestamp(T0 + timedelta(seconds=s)) for s in (0, 10, 20)]
    # Commits 30/s while records arrive 10/s: 600 left at 20/s net is 30 s.
    pace = catch_up(at, [0, 300, 600], [1000, 1100, 1200], [50.0, 40.0, 30.0])
    assert pace.catching_up and pace.catch_up_s == 30.0
    assert pace.consume_rate == 30.0 and pace.produce_rate == 10.0
    assert pace.lag_s_trend == pytest.approx(-1.0)
    behind = catch_up(at, [0, 50, 100], [1000, 1100, 1200], [50.0, 55.0, 60.0])
    assert behind.catching_up is False and behind.catch_up_s is None
    # Keeping pace: everything committed at the middle sample, a few records since.
    pace = catch_up(at, [995, 1100, 1190], [1000, 1100, 1200], [2.0, 0.0, 1.0])
    assert pace.catching_up is True and pace.catch_up_s is None
    assert catch_up(at[:1], [0], [5], [1.0]).catching_up is None


def test_every_partitions_series_is_its_own_samples_sorted_with_the_lso_never_falling() -> None:
    import numpy as np
    import pandas as pd

    from spark_jobs.analyze.lag_seconds import Arrivals, arrivals

    rng = np.random.default_rng(3)
    n = 400
    offsets = pd.DataFrame(
        {
            "sampled_at": pd.to_datetime(rng.integers(0, 50, n), unit="s", utc=True),
            "topic": rng.choice(["a", "b"], n),
            "partition": rng.integers(0, 3, n).astype("int32"),
            "lso": pd.array(rng.integers(0, 100, n), dtype="Int64"),
        }
    )
    offsets.loc[rng.random(n) < 0.1, "lso"] = pd.NA
    found = arrivals(offsets)
    present = offsets[offsets["lso"].notna()]
    for (topic, partition), rows in present.groupby(["topic", "partition"]):
        one = Arrivals.of(rows)
        got = found[(topic, int(partition))]
        assert got.at_ns.tolist() == one.at_ns.tolist()
        assert got.lso.tolist() == one.lso.tolist()
    assert len(found) == present.groupby(["topic", "partition"]).ngroups
    assert set(arrivals(offsets, {("a", 1)})) == {("a", 1)}


def test_a_share_group_with_nothing_unacknowledged_is_not_late() -> None:
    """Its start offset trails 20 acknowledged records (lag from it > 0): with the broker's
    share lag 0 nothing is late; without it (older brokers), lag from the start offset."""
    arrivals = [0.1 + o / 10 for o in range(200)]
    offsets, group = _frames(arrivals, [0.0, 5.0, 10.0], [0, 0, 20])
    samples = pa.Table.from_pandas(offsets, preserve_index=False)
    for share_lag, expected in ((0, 0.0), (None, 7.9)):
        rows = group.assign(share_lag=pd.array([share_lag] * 3, dtype="Int64"))
        lagged = lagged_group_offsets(pa.Table.from_pandas(rows, preserve_index=False), samples)
        assert lagged["lag_s"][2].as_py() == pytest.approx(expected), share_lag
