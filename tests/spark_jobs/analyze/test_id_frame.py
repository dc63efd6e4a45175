"""id_frame's one-key forms of pandas' duplicate tests (`distinct`, `repeated`), against
pandas itself on generated frames: small codes, window micros, NO_TIME, NaN, and codes whose
ranges multiply past 63 bits (the fallback)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spark_jobs.analyze.id_frame import distinct, repeated
from spark_jobs.analyze.output import NO_TIME


def _frame(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    windows = rng.choice([NO_TIME, 1_767_225_600_000_000, 1_767_225_660_000_000], n)
    huge = rng.choice([0, 2**40, 2**41], n)  # dense by no measure: factorized
    return pd.DataFrame(
        {
            "topic": rng.integers(0, 4, n),
            "pipeline": rng.integers(0, 3, n),
            "message_id": rng.integers(0, max(n // 3, 1), n),
            "window_us": windows,
            "huge": huge,
            "ratio": rng.choice([np.nan, 0.5, 1.5], n),
        }
    )


COLUMNS = [
    ["topic", "message_id"],
    ["pipeline", "topic", "window_us", "message_id"],
    ["window_us", "ratio"],
    ["huge", "message_id"],
]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n", [0, 1, 7, 500])
@pytest.mark.parametrize("columns", COLUMNS)
def test_the_one_key_forms_are_pandas_own(seed: int, n: int, columns: list[str]) -> None:
    frame = _frame(seed, n)
    pd.testing.assert_frame_equal(distinct(frame, columns), frame.drop_duplicates(columns))
    assert (repeated(frame, columns) == frame.duplicated(columns, keep=False).to_numpy()).all()


def test_codes_past_63_bits_fall_back_to_pandas() -> None:
    # Seven columns of codes up to 4 * n each: their ranges multiply past 2**62.
    rng = np.random.default_rng(3)
    n = 1000
    frame = pd.DataFrame({f"c{i}": rng.integers(0, 4 * n, n) for i in range(7)})
    frame = pd.concat([frame, frame.iloc[::3]], ignore_index=True)  # some rows twice
    columns = list(frame.columns)
    pd.testing.assert_frame_equal(distinct(frame, columns), frame.drop_duplicates(columns))
    assert (repeated(frame, columns) == frame.duplicated(columns, keep=False).to_numpy()).all()
