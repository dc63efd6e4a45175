"""Late records and the per-record delivery latency (spark_jobs/analyze/late.py) on hand-made
rows: rows as loss.lost gives `checked` and per_id its committed sink rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from spark_jobs.analyze import late as rules

S = 1_000_000  # micros


def _checked(ids: list[int], ts: list[int], counted: list[bool] | None = None) -> pd.DataFrame:
    n = len(ids)
    return pd.DataFrame(
        {"pipeline": 0, "message_id": ids, "ts": ts, "has_ts": True, "topic": 0,
         "partition": 0, "offset": range(5, 5 + n), "_row": range(n),
         "counted": counted or [False] * n, "is_beyond": False}
    )  # fmt: skip


def _sinks(ids: list[int], rows: list[int], ts: list[int] | None = None) -> pd.DataFrame:
    n = len(ids)
    return pd.DataFrame(
        {"pipeline": 0, "message_id": ids, "has_id": True, "has_ts": True, "_row": rows,
         "ts": ts or [0] * n, "topic": 1, "partition": 0, "offset": range(40, 40 + n)}
    )  # fmt: skip


def test_the_latency_is_first_readable_sink_copy_minus_the_source_record() -> None:
    checked = _checked([1, 1, 2], [10, 20, 30], counted=[False, False, True])
    sinks = _sinks([1, 1], [3, 4])
    arrived = pd.Series([1.0, 1.5, 2.0, 9.0, 4.0]) * S
    timed = rules.by_arrivals(rules.first_checked(checked), sinks, arrived)
    # id 1: its first checked record (row 0, arrived 1 s), its first readable copy (row 4,
    # offset 41, 4 s); id 2 is lost (counted): no latency.
    assert timed["delay_us"].tolist() == [3 * S]
    assert timed["ts"].tolist() == [10]
    assert timed["copy_offset"].tolist() == [41]


def test_an_unknown_arrival_measures_nothing() -> None:
    checked, sinks = _checked([1], [10]), _sinks([1], [1])
    found = rules.by_arrivals(rules.first_checked(checked), sinks, pd.Series([np.nan, 4e6]))
    assert found.empty


def test_an_objective_makes_late_what_took_longer_by_arrivals_only() -> None:
    checked = _checked([1, 2, 3], [0, 0, 0])
    sinks = _sinks([1, 2, 3], [3, 4, 5], ts=[0, 0, 0])  # timestamps copied: no delay there
    arrived = pd.Series([0.0, 0.0, np.nan, 2.0, 6.0, 9.0]) * S
    found = rules.late(rules.first_checked(checked), sinks, arrived, {0: 5 * S}, {})
    # id 1 took 2 s, id 2 6 s (late), id 3's source arrival is unknown: not judged.
    assert found["message_id"].tolist() == [2]
    assert found["delay_us"].tolist() == [6 * S]
    assert found["measured_by"].tolist() == [rules.ARRIVALS]


def test_a_deadline_without_an_objective_measures_timestamps_as_it_always_did() -> None:
    checked = _checked([1, 2], [10 * S, 10 * S])
    sinks = _sinks([1, 2, 2], [2, 3, 4], ts=[14 * S, 13 * S, 20 * S])
    arrived = pd.Series([np.nan] * 5)  # no arrivals: timestamps only
    found = rules.late(rules.first_checked(checked), sinks, arrived, {}, {0: 3 * S})
    # id 1's copy came 4 s after it (> 3 s): late; id 2's first copy by timestamp 3 s: not.
    assert found["message_id"].tolist() == [1]
    assert found["delay_us"].tolist() == [4 * S]
    assert found["measured_by"].tolist() == [rules.TIMESTAMPS]


def test_no_objective_and_no_deadline_finds_nothing() -> None:
    checked, sinks = _checked([1], [0]), _sinks([1], [1], ts=[10**12])
    assert rules.late(rules.first_checked(checked), sinks, pd.Series([0.0, 9e9]), {}, {}).empty
