"""Every partition's window of group_offsets samples at once (group_status.py): the Window the
rules read, as numpy arrays with one element per partition, from the samples of all
partitions sorted by partition and time. `summarize` is the same for one partition's list of
samples; this form keeps the table from a pandas frame per partition (0.55 s against 0.04 s
for 500 partitions, on the driver after a rebuild's passes, when the executors wait:
bench/HISTORY.md, "The rebuild at 10M: the driver's tail").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Spans:
    """Where each partition's rows lie among the sorted samples: its first row, the first
    row of its window (its last `size`), and one past its last row."""

    start: np.ndarray
    window: np.ndarray
    end: np.ndarray

    @staticmethod
    def of(partition: np.ndarray, size: int) -> Spans:
        """`partition`: each row's partition code, equal codes adjacent."""
        n = len(partition)
        start = np.flatnonzero(np.r_[True, partition[1:] != partition[:-1]]) if n else partition
        end = np.r_[start[1:], n].astype(np.int64)
        return Spans(start, np.maximum(start, end - size), end)

    def in_window(self) -> np.ndarray:
        """Per row: whether it lies in its partition's window."""
        first = np.repeat(self.window, self.end - self.start)
        return np.arange(len(first)) >= first


def _inside(flags: np.ndarray, spans: Spans) -> np.ndarray:
    """Per partition: how many rows after the first of its window have `flags` set."""
    counted: np.ndarray = np.r_[np.int64(0), np.cumsum(flags, dtype=np.int64)]
    inside: np.ndarray = counted[spans.end] - counted[spans.window + 1]
    return inside


def _dropped(values: np.ndarray) -> np.ndarray:
    """Per row: is its value below the row before it (the first row: no)."""
    dropped: np.ndarray = np.r_[False, values[1:] < values[:-1]]
    return dropped


def window_fields(
    spans: Spans,
    committed: np.ndarray,
    lag: np.ndarray,
    at_ns: np.ndarray,
    owned: np.ndarray,
) -> dict[str, np.ndarray]:
    """The fields of each partition's Window (group_status.py), as summarize gives them for
    the partition's samples (at least one row): `lag` is the end offset minus the committed
    one, clamped at 0 here."""
    lags = np.maximum(lag, 0)
    first, last = spans.window, spans.end - 1
    lowest = np.where(spans.in_window(), lags, np.iinfo(np.int64).max)
    # The start of the last run of the newest committed offset: its last change in the
    # window (a change at row i: committed differs from row i - 1), else the window's start.
    rows = np.arange(len(committed))
    changed = np.r_[False, committed[1:] != committed[:-1]]
    last_change = np.maximum.accumulate(np.where(changed, rows, -1))[last]
    run_start = np.where(last_change > first, last_change, first)
    return dict(
        samples=spans.end - first,
        lag_start=lags[first],
        lag_end=lags[last],
        lag_min=np.minimum.reduceat(lowest, spans.start),
        lag_never_fell=_inside(_dropped(lags), spans) == 0,
        committed_start=committed[first],
        committed_end=committed[last],
        rewound=_inside(_dropped(committed), spans) > 0,
        unmoved=at_ns[run_start] <= at_ns[first],
        unowned=~owned[last],
    )
