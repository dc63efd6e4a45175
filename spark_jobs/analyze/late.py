"""Late records (docs/design.md, "Late records"): checked records that were delivered, but
later than their pipeline's objective after the record. One rule, two measures:

- a pipeline with a `latency_objective`: its delivery latency (latency.py: its first sink
  copy's arrival minus its own, from the arrivals the audit stamps), a record without both
  arrivals not judged;
- a deadline claim without one: its first sink copy's timestamp minus its own, against
  max_delay (the claim's objective, as loss.late always counted it).

Each late record is counted (`late_records`) and kept as a row with its delay and its first
sink copy, the slowest records a pipeline's card lists.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

ARRIVALS, TIMESTAMPS = "arrivals", "timestamps"  # how a late record's delay was measured
_KEYS = ["pipeline", "message_id"]
_ORDER = ["ts", "topic", "partition", "offset"]


def first_checked(checked: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline and checked id its first checked source row (by timestamp, topic,
    partition, offset): the record whose delivery is timed."""
    found = checked[~checked["counted"] & ~checked["is_beyond"]]
    return found.sort_values([*_KEYS, *_ORDER]).drop_duplicates(_KEYS)


def first_copies(sinks: pd.DataFrame, at: np.ndarray) -> pd.DataFrame:
    """(pipeline, message_id, copy_at, copy_topic, copy_partition, copy_offset): per id the
    first of its committed sink copies (`sinks`) by `at` (one value a row; NaN: unknown, not
    a candidate), ties by topic, partition, offset."""
    copies = sinks.assign(copy_at=at)
    copies = copies[copies["has_id"] & copies["copy_at"].notna()]
    first = copies.sort_values([*_KEYS, "copy_at", "topic", "partition", "offset"])
    first = first.drop_duplicates(_KEYS)
    return first[[*_KEYS, "copy_at", "topic", "partition", "offset"]].rename(
        columns={"topic": "copy_topic", "partition": "copy_partition", "offset": "copy_offset"}
    )


def by_arrivals(first: pd.DataFrame, sinks: pd.DataFrame, arrived_us: pd.Series) -> pd.DataFrame:
    """`first` (first_checked) rows with both arrivals known, their first readable sink copy
    and `delay_us`, its delivery latency. `arrived_us`: arrival micros by `_row` (NaN when
    unknown)."""
    copies = first_copies(sinks, arrived_us.reindex(sinks["_row"].to_numpy()).to_numpy())
    source_at = arrived_us.reindex(first["_row"].to_numpy()).to_numpy()
    found = first.assign(source_at=source_at).merge(copies, on=_KEYS)
    found = found[found["source_at"].notna()]
    return found.assign(delay_us=found["copy_at"] - found["source_at"])


def late(
    first: pd.DataFrame,
    sinks: pd.DataFrame,
    arrived_us: pd.Series,
    objectives: Mapping[int, int],
    deadlines: Mapping[int, int],
) -> pd.DataFrame:
    """The late rows of `first` (first_checked) with delay_us, measured_by and their first
    sink copy. `objectives`: pipeline (code) -> latency_objective micros, by arrivals;
    `deadlines`: deadline pipeline without one -> max_delay micros, by timestamps."""
    parts = []
    if objectives:
        mine = first[first["pipeline"].isin(list(objectives))]
        timed = by_arrivals(mine, sinks[sinks["pipeline"].isin(list(objectives))], arrived_us)
        limit = timed["pipeline"].map(objectives)
        parts.append(timed[timed["delay_us"] > limit].assign(measured_by=ARRIVALS))
    if deadlines:
        mine = first[first["pipeline"].isin(list(deadlines))]
        stamped = sinks[sinks["pipeline"].isin(list(deadlines)) & sinks["has_ts"]]
        copies = first_copies(stamped, stamped["ts"].to_numpy(dtype="float64"))
        timed = mine.merge(copies, on=_KEYS)
        # Compared in integers, as the deadline always was (a copy's micros are exact).
        copy_us = timed["copy_at"].astype("int64")
        over = copy_us > timed["ts"] + timed["pipeline"].map(deadlines)
        delay = copy_us.astype("float64") - timed["ts"].astype("float64")
        parts.append(timed[over].assign(delay_us=delay[over], measured_by=TIMESTAMPS))
    found = [part for part in parts if not part.empty]
    return pd.concat(found, ignore_index=True) if found else none(first)


def none(first: pd.DataFrame) -> pd.DataFrame:
    """No late record: `first`'s columns and late's, no row."""
    floats, ints = pd.Series(dtype="float64"), pd.Series(dtype="int64")
    return first.iloc[0:0].assign(
        copy_at=floats, copy_topic=ints, copy_partition=ints, copy_offset=ints,
        delay_us=floats, measured_by=pd.Series(dtype=object),
    )  # fmt: skip
